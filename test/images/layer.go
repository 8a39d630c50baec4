package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os/exec"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the modification time of every file in every layer, so that the
// same inputs always give the same digests.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// file is one entry of a layer. Exactly one of dir, link or body applies.
type file struct {
	name string // relative, no leading slash: "bin/busybox"
	mode int64
	dir  bool
	link string // symlink target
	body []byte
}

// newLayer returns a gzip-compressed OCI layer holding files, in order. The
// layer is built and compressed once, here, and kept in memory.
func newLayer(files []file) (v1.Layer, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			ModTime: epoch,
			Uname:   "root",
			Gname:   "root",
			Format:  tar.FormatPAX,
		}
		switch {
		case f.dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case f.link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s to layer: %w", f.name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.body); err != nil {
				return nil, fmt.Errorf("writing %s to layer: %w", f.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	gzipPath, _ := exec.LookPath("gzip")
	gz, err := compress(tarBuf.Bytes(), gzipPath)
	if err != nil {
		return nil, fmt.Errorf("compressing layer: %w", err)
	}
	l := &memLayer{uncompressed: tarBuf.Bytes(), compressed: gz}
	if l.diffID, _, err = v1.SHA256(bytes.NewReader(l.uncompressed)); err != nil {
		return nil, err
	}
	if l.digest, _, err = v1.SHA256(bytes.NewReader(l.compressed)); err != nil {
		return nil, err
	}
	return l, nil
}

// compress gzips b with the gzip command at gzipPath, or in process when
// gzipPath is empty. The command is no faster in a normal build, but tests run with
// -race, under which compress/flate is about fifteen times slower: an image
// with a Go program would take seconds to build. gzip -n leaves out the
// name and time, so the output only depends on the input.
func compress(b []byte, gzipPath string) ([]byte, error) {
	if gzipPath != "" {
		cmd := exec.Command(gzipPath, "-n", "-1", "-c")
		cmd.Stdin = bytes.NewReader(b)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("gzip: %w: %s", err, stderr.String())
		}
		return out.Bytes(), nil
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// memLayer is a layer held in memory, compressed and not, with both
// digests computed up front.
type memLayer struct {
	uncompressed, compressed []byte
	diffID, digest           v1.Hash
}

var _ v1.Layer = (*memLayer)(nil)

func (l *memLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *memLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *memLayer) Size() (int64, error)     { return int64(len(l.compressed)), nil }
func (l *memLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}

func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.compressed)), nil
}

func (l *memLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.uncompressed)), nil
}
