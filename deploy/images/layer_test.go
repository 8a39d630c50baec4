package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func TestNewLayerDigests(t *testing.T) {
	l, err := NewLayer([]File{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/x", Mode: 0o755, Body: []byte("#!/bin/sh\n")},
		{Name: "bin/y", Mode: 0o777, Link: "x"},
	}, testTime, GzipFast)
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

// entry is what a test reads back of a tar header.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Body     string
}

func readTar(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out = append(out, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.UTC(), string(body)})
	}
}

func TestNewLayerSortsAndFixesTimes(t *testing.T) {
	files := []File{
		{Name: "usr/local/bin/kip", Mode: 0o755, Body: []byte("kip")},
		{Name: "tmp", Mode: 0o1777, Dir: true},
		{Name: "home/kip", Mode: 0o700, Dir: true, UID: UID, GID: GID, Owner: UserName},
		{Name: "usr/local/bin", Mode: 0o755, Dir: true},
		{Name: "bin/sh", Mode: 0o777, Link: "/usr/local/bin/kip"},
	}
	l, err := NewLayer(files, testTime, GzipFast)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := l.Uncompressed()
	got := readTar(t, rc)
	want := []entry{
		{"bin/sh", tar.TypeSymlink, 0o777, 0, 0, testTime, ""},
		{"home/kip/", tar.TypeDir, 0o700, UID, GID, testTime, ""},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, testTime, ""},
		{"usr/local/bin/", tar.TypeDir, 0o755, 0, 0, testTime, ""},
		{"usr/local/bin/kip", tar.TypeReg, 0o755, 0, 0, testTime, "kip"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("layer entries (-want +got):\n%s", d)
	}

	// The order files come in does not matter.
	rev := []File{files[4], files[3], files[2], files[1], files[0]}
	l2, err := NewLayer(rev, testTime, GzipFast)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := l.Digest()
	d2, _ := l2.Digest()
	if d1 != d2 {
		t.Errorf("the same files in another order give digest %s, want %s", d2, d1)
	}
}

func TestNewLayerRefusesTwoEntriesOfOneName(t *testing.T) {
	_, err := NewLayer([]File{{Name: "a", Body: []byte("1")}, {Name: "a", Body: []byte("2")}}, testTime, GzipFast)
	if err == nil || !strings.Contains(err.Error(), "two entries of that name") {
		t.Errorf("err = %v, want two entries of that name", err)
	}
}

func TestGzipIsDeterministic(t *testing.T) {
	input := bytes.Repeat([]byte("kip release layer "), 10000)
	for name, c := range map[string]Compressor{"Gzip": Gzip, "GzipFast": GzipFast} {
		a, err := c(input)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := c(input)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two compressions of the same input differ", name)
		}
		zr, err := gzip.NewReader(bytes.NewReader(a))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, input) {
			t.Errorf("%s: round trip gives %d bytes, %v; want the %d input bytes", name, len(got), err, len(input))
		}
		if zr.ModTime.Unix() > 0 || zr.Name != "" {
			t.Errorf("%s: the gzip header holds a time (%v) or name (%q)", name, zr.ModTime, zr.Name)
		}
	}
}
