package images

import (
	"bytes"
	"compress/gzip"
	"io"
	"os/exec"
	"testing"
)

func TestCompress(t *testing.T) {
	input := bytes.Repeat([]byte("kip test layer "), 10000)
	tests := []struct {
		name     string
		gzipPath string
	}{
		{name: "in process"},
	}
	if p, err := exec.LookPath("gzip"); err == nil {
		tests = append(tests, struct {
			name     string
			gzipPath string
		}{"gzip command", p})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := compress(input, tt.gzipPath)
			if err != nil {
				t.Fatal(err)
			}
			b, err := compress(input, tt.gzipPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Error("two compressions of the same input differ")
			}
			zr, err := gzip.NewReader(bytes.NewReader(a))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, input) {
				t.Errorf("round trip: %d bytes, %v; want the %d input bytes", len(got), err, len(input))
			}
		})
	}
}
