package pluginapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeInstall(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	provider := infoProvider{info: &GetInfoResponse{Name: "mycloud", Version: "1.2.3", APIVersions: []string{"1.0"}}}

	tests := []struct {
		name  string
		older []byte // a file already at the destination, if any
	}{
		{name: "into an empty directory"},
		{name: "over an older binary", older: []byte("#!/bin/sh\necho old\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, "kip-plugin-mycloud")
			if tt.older != nil {
				if err := os.WriteFile(dst, tt.older, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			// args[0] is not the file's name: the name comes from GetInfo.
			code := serve([]string{"/ko-app/plugin", "install", dir}, factoryOf(provider), &stdout, &stderr)
			if code != 0 {
				t.Fatalf("install exited %d, want 0; stderr: %s", code, stderr.String())
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s holds %d bytes, not the %d of the executable %s", dst, len(got), len(want), self)
			}
			st, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755", st.Mode().Perm())
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("directory holds %q, want only kip-plugin-mycloud (no temporary file left)", names)
			}
			wantOut := "installed " + dst + ": kip-plugin-mycloud 1.2.3, sha256 " + hex.EncodeToString(sum[:]) + "\n"
			if stdout.String() != wantOut {
				t.Errorf("stdout = %q, want %q", stdout.String(), wantOut)
			}
		})
	}
}

func TestServeInstallFails(t *testing.T) {
	valid := infoProvider{info: &GetInfoResponse{Name: "x", Version: "1", APIVersions: []string{"1.0"}}}
	tests := []struct {
		name       string
		args       func(dir string) []string
		provider   Provider
		wantCode   int
		wantStderr string
	}{
		{
			name:     "no directory",
			args:     func(string) []string { return []string{"kip-plugin-x", "install"} },
			provider: valid, wantCode: 2, wantStderr: "install takes one argument, the directory",
		},
		{
			name:     "two directories",
			args:     func(dir string) []string { return []string{"kip-plugin-x", "install", dir, dir} },
			provider: valid, wantCode: 2, wantStderr: "install takes one argument, the directory",
		},
		{
			name:     "a directory that does not exist",
			args:     func(dir string) []string { return []string{"kip-plugin-x", "install", filepath.Join(dir, "missing")} },
			provider: valid, wantCode: 1, wantStderr: "installing plugin x: creating a temporary file in",
		},
		{
			name:     "an invalid info",
			args:     func(dir string) []string { return []string{"kip-plugin-x", "install", dir} },
			provider: infoProvider{info: &GetInfoResponse{Name: "x"}}, wantCode: 1, wantStderr: "installing plugin: version is empty",
		},
		{
			name:     "a name that is no file name",
			args:     func(dir string) []string { return []string{"kip-plugin-x", "install", dir} },
			provider: infoProvider{info: &GetInfoResponse{Name: "../x", Version: "1", APIVersions: []string{"1.0"}}},
			wantCode: 1, wantStderr: `installing plugin: name "../x" is not a plugin name`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			code := serve(tt.args(dir), factoryOf(tt.provider), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exited %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%d files left in the directory, want none", len(entries))
			}
		})
	}
}
