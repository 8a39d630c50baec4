package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer. Exactly one of Dir, Link or Body applies
// (a regular file may be empty).
type File struct {
	// Name is the path in the image, relative, without a leading slash:
	// "usr/local/bin/kip".
	Name string
	// Mode is the permission bits, with the sticky bit where it applies
	// (0o1777 for /tmp).
	Mode int64
	// Dir makes the entry a directory.
	Dir bool
	// Link makes the entry a symbolic link to Link.
	Link string
	// Body is a regular file's content.
	Body []byte
	// UID and GID own the entry; 0 (root) unless set. Owner names the
	// owner in the tar header (root when empty).
	UID, GID int
	Owner    string
}

// Compressor gzips a layer's tar stream. Its output must depend on its
// input only.
type Compressor func([]byte) ([]byte, error)

// Gzip is the Compressor of release images: compress/gzip at the default
// level, in process, whose output depends only on the input and the Go
// version (a gzip command's would depend on its version too).
func Gzip(b []byte) ([]byte, error) { return gzipLevel(b, gzip.DefaultCompression) }

// GzipFast is compress/gzip at its fastest level, in process.
func GzipFast(b []byte) ([]byte, error) { return gzipLevel(b, gzip.BestSpeed) }

func gzipLevel(b []byte, level int) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, level)
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

// NewLayer returns a gzip-compressed OCI layer holding files sorted by
// name, each with the modification time mtime, so that the same files
// always give the same digests whatever order they come in. The layer is
// built and compressed once, here, and kept in memory. Two entries with
// the same name are an error.
func NewLayer(files []File, mtime time.Time, compress Compressor) (v1.Layer, error) {
	sorted := slices.Clone(files)
	slices.SortStableFunc(sorted, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for i, f := range sorted {
		if i > 0 && sorted[i-1].Name == f.Name {
			return nil, fmt.Errorf("writing %s to layer: two entries of that name", f.Name)
		}
		owner := f.Owner
		if owner == "" {
			owner = "root"
		}
		h := &tar.Header{
			Name:    f.Name,
			Mode:    f.Mode,
			ModTime: mtime.UTC(),
			Uid:     f.UID,
			Gid:     f.GID,
			Uname:   owner,
			Gname:   owner,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case f.Link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.Link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s to layer: %w", f.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, fmt.Errorf("writing %s to layer: %w", f.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	gz, err := compress(tarBuf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("compressing layer: %w", err)
	}
	l := &memLayer{compressed: gz}
	if l.diffID, _, err = v1.SHA256(&tarBuf); err != nil {
		return nil, err
	}
	if l.digest, _, err = v1.SHA256(bytes.NewReader(l.compressed)); err != nil {
		return nil, err
	}
	return l, nil
}

// memLayer is a layer held in memory, compressed only (the release images
// hold hundreds of megabytes of binaries), with both digests computed up
// front.
type memLayer struct {
	compressed     []byte
	diffID, digest v1.Hash
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
	return gzip.NewReader(bytes.NewReader(l.compressed))
}
