package images

import (
	"bytes"
	"fmt"
	"os/exec"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	kipimages "github.com/kipcell/kip/deploy/images"
)

// epoch is the modification time of every file in every layer, so that the
// same inputs always give the same digests.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// newLayer returns a gzip-compressed OCI layer holding files, built as the
// release images' layers are (deploy/images.NewLayer: sorted, every time
// epoch), but compressed by the gzip command when there is one (compress).
func newLayer(files []kipimages.File) (v1.Layer, error) {
	gzipPath, _ := exec.LookPath("gzip")
	return kipimages.NewLayer(files, epoch, func(b []byte) ([]byte, error) { return compress(b, gzipPath) })
}

// Compress gzips b as the test images' layers are: with the gzip command
// when there is one (-n -1), else in process. A test that builds release
// images (deploy/images) under -race passes it as their Compressor.
func Compress(b []byte) ([]byte, error) {
	gzipPath, _ := exec.LookPath("gzip")
	return compress(b, gzipPath)
}

// compress gzips b with the gzip command at gzipPath, or in process when
// gzipPath is empty. The command is no faster in a normal build, but tests run with
// -race, under which compress/flate is about fifteen times slower: an image
// with a Go program would take seconds to build. gzip -n leaves out the
// name and time, so the output only depends on the input (and the gzip
// version: which is why the release images, deploy/images, compress in
// process).
func compress(b []byte, gzipPath string) ([]byte, error) {
	if gzipPath == "" {
		return kipimages.GzipFast(b)
	}
	cmd := exec.Command(gzipPath, "-n", "-1", "-c")
	cmd.Stdin = bytes.NewReader(b)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("gzip: %w: %s", err, stderr.String())
	}
	return out.Bytes(), nil
}
