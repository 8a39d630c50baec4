package images

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os/exec"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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

func TestMemLayerDigests(t *testing.T) {
	l, err := newLayer([]file{
		{name: "bin", mode: 0o755, dir: true},
		{name: "bin/x", mode: 0o755, body: []byte("#!/bin/sh\n")},
		{name: "bin/y", mode: 0o777, link: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, open func() (io.ReadCloser, error), digest func() (v1.Hash, error)) {
		rc, err := open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		sum := sha256.Sum256(b)
		h, err := digest()
		if err != nil {
			t.Fatal(err)
		}
		if want := "sha256:" + hex.EncodeToString(sum[:]); h.String() != want {
			t.Errorf("%s = %s, want %s", what, h, want)
		}
	}
	check("Digest", l.Compressed, l.Digest)
	check("DiffID", l.Uncompressed, l.DiffID)

	rc, _ := l.Compressed()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	unz, _ := io.ReadAll(zr)
	rc2, _ := l.Uncompressed()
	raw, _ := io.ReadAll(rc2)
	if !bytes.Equal(unz, raw) {
		t.Error("Compressed does not decompress to Uncompressed")
	}
	if size, _ := l.Size(); size <= 0 {
		t.Errorf("Size() = %d", size)
	}
}
