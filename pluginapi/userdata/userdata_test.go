package userdata

import (
	"bytes"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

const testBootstrap = `{"version":1,"cellID":"cell-1","caCert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}`

func TestUserDataGolden(t *testing.T) {
	cloudConfig := []byte("#cloud-config\npackages: [containerd, runc]\n")
	data, err := Build(cloudConfig, []byte(testBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "user-data.golden", data)
	again, _ := Build(cloudConfig, []byte(testBootstrap))
	if !bytes.Equal(data, again) {
		t.Error("Build is not deterministic; a retried RunInstances would differ from the first")
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	tests := map[string]struct{ cloudConfig, bootstrap string }{
		"with cloud-config":         {"#cloud-config\nruncmd: [[echo, hi]]\n", testBootstrap},
		"without cloud-config":      {"", testBootstrap},
		"trailing newlines kept":    {"#cloud-config\n", testBootstrap + "\n\n"},
		"CRLF inside kept":          {"#cloud-config\r\n", "{\r\n\"a\": 1\r\n}"},
		"no trailing newline":       {"#cloud-config", "{}"},
		"dashes like a boundary":    {"#cloud-config\n--\n----\n", "{\"x\":\"--kipcell-\"}"},
		"multibyte":                 {"#cloud-config\n# café\n", `{"name":"żółw"}`},
		"cloud-config ends in CRLF": {"#cloud-config\r\n\r\n", testBootstrap},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := Build([]byte(tt.cloudConfig), []byte(tt.bootstrap))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Bootstrap(data)
			if err != nil {
				t.Fatalf("Bootstrap: %v\n%s", err, data)
			}
			if string(got) != tt.bootstrap {
				t.Errorf("bootstrap = %q, want %q", got, tt.bootstrap)
			}
			if tt.cloudConfig != "" && !bytes.Contains(data, []byte("Content-Type: text/cloud-config")) {
				t.Errorf("user data has no cloud-config part:\n%s", data)
			}
		})
	}
}

func TestBootstrapAcceptsOtherForms(t *testing.T) {
	// A bare bootstrap, as the local plugin writes it.
	if got, err := Bootstrap([]byte("  " + testBootstrap)); err != nil || string(got) != "  "+testBootstrap {
		t.Errorf("bare JSON = %q, %v", got, err)
	}
	// A base64 part and LF line ends, as other MIME tools write them.
	enc := base64.StdEncoding.EncodeToString([]byte(testBootstrap))
	wrapped := enc[:20] + "\n" + enc[20:]
	data := "Content-Type: multipart/mixed; boundary=XYZ\nMIME-Version: 1.0\n\n" +
		"--XYZ\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n" +
		"--XYZ\nContent-Type: application/vnd.kipcell.bootstrap+json\nContent-Transfer-Encoding: base64\n\n" + wrapped + "\n--XYZ--\n"
	if got, err := Bootstrap([]byte(data)); err != nil || string(got) != testBootstrap {
		t.Errorf("base64 part = %q, %v", got, err)
	}
}

func TestBootstrapErrors(t *testing.T) {
	noPart, _ := Build([]byte("#cloud-config\n"), nil)
	tests := map[string]struct {
		data string
		want string
	}{
		"shell script":    {"#!/bin/sh\necho hi\n", "neither a bootstrap"},
		"not multipart":   {"Content-Type: text/plain\n\nhello", "not multipart"},
		"no boundary":     {"Content-Type: multipart/mixed\n\nhello", "not multipart"},
		"no such part":    {string(noPart), "no application/vnd.kipcell.bootstrap+json part"},
		"truncated":       {"Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/plain\n\nx", ""},
		"empty user data": {"", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Bootstrap([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Bootstrap = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestBuildEmpty(t *testing.T) {
	if data, err := Build(nil, nil); err != nil || data != nil {
		t.Errorf("Build(nil, nil) = %q, %v; want no user data", data, err)
	}
}
