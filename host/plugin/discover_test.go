package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiscoverAndFind(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{
		BinaryPrefix + "zeta":   0o755,
		BinaryPrefix + "alpha":  0o700,
		BinaryPrefix + "noexec": 0o644,
		BinaryPrefix:            0o755, // no name
		"other-binary":          0o755,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, BinaryPrefix+"dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, BinaryPrefix+"zeta"), filepath.Join(dir, BinaryPrefix+"link")); err != nil {
		t.Fatal(err)
	}

	got, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Found{
		{Name: "alpha", Path: filepath.Join(dir, BinaryPrefix+"alpha")},
		{Name: "link", Path: filepath.Join(dir, BinaryPrefix+"link")},
		{Name: "zeta", Path: filepath.Join(dir, BinaryPrefix+"zeta")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
	if _, err := Discover(filepath.Join(dir, "nope")); err == nil {
		t.Error("Discover of a missing directory: no error")
	}

	tests := []struct {
		name     string
		wantPath string
		wantErr  string
	}{
		{name: "alpha", wantPath: filepath.Join(dir, BinaryPrefix+"alpha")},
		{name: "missing", wantErr: "plugin missing: no kip-plugin-missing in " + dir},
		{name: "noexec", wantErr: "plugin noexec: " + filepath.Join(dir, BinaryPrefix+"noexec") + " is not executable"},
		{name: "dir", wantErr: "plugin dir: " + filepath.Join(dir, BinaryPrefix+"dir") + " is not a regular file"},
		{name: "../x", wantErr: `plugin ../x: invalid plugin name "../x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Find(dir, tt.name)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrMissing) {
					t.Fatalf("Find = %q, %v; want error %q matching ErrMissing", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.wantPath {
				t.Fatalf("Find = %q, %v; want %q", got, err, tt.wantPath)
			}
		})
	}
}

func TestFileSHA256(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := FileSHA256(path)
	if want := "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"; err != nil || got != want {
		t.Errorf("FileSHA256 = %q, %v; want %q", got, err, want)
	}
	if _, err := FileSHA256(path + ".missing"); err == nil {
		t.Error("FileSHA256 of a missing file: no error")
	}
}

func TestDescribe(t *testing.T) {
	dir := t.TempDir()
	_, plugin := installPlugin(t, pluginV1)
	tests := []struct {
		name    string
		path    string
		wantErr error
		wantMsg string
	}{
		{name: "plugin", path: plugin},
		{name: "chatty script", path: writeScript(t, filepath.Join(dir, "kip-plugin-chatty"), "echo hello\n"),
			wantErr: ErrNotPlugin, wantMsg: `plugin chatty (` + filepath.Join(dir, "kip-plugin-chatty") + `): not a Kip plugin: "describe" printed "hello", not a plugin description`},
		{name: "silent", path: writeScript(t, filepath.Join(dir, "kip-plugin-silent"), "exit 0\n"),
			wantErr: ErrNotPlugin, wantMsg: `"describe" printed nothing`},
		{name: "failing", path: writeScript(t, filepath.Join(dir, "kip-plugin-failing"), "echo no such command >&2; exit 3\n"),
			wantErr: ErrNotPlugin, wantMsg: `"describe" failed (exit status 3): no such command`},
		{name: "old API", path: writeScript(t, filepath.Join(dir, "kip-plugin-old"), `echo '{"name":"old","version":"1","apiVersions":["0.9"]}'`+"\n"),
			wantErr: ErrIncompatible, wantMsg: `incompatible API version: plugin implements ["0.9"]`},
		{name: "missing", path: filepath.Join(dir, "kip-plugin-missing"), wantErr: ErrMissing, wantMsg: "no plugin binary at"},
		{name: "name mismatch", path: writeScript(t, filepath.Join(dir, "kip-plugin-toy2"), `echo '{"name":"toy","version":"1","apiVersions":["1.0"]}'`+"\n"),
			wantErr: ErrNameMismatch, wantMsg: `plugin toy2 (` + filepath.Join(dir, "kip-plugin-toy2") + `): name mismatch: kip-plugin-toy2 reports the name "toy", not "toy2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Describe(t.Context(), tt.path)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Describe: %v", err)
				}
				if info.Name != "fake" || info.Version != "1.0.0" {
					t.Errorf("Describe = %+v; want name fake, version 1.0.0", info)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Describe error = %v; want an *Error matching %v", err, tt.wantErr)
			}
			if e.Path != tt.path || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Describe error = %q; want path %s and %q", err, tt.path, tt.wantMsg)
			}
		})
	}
}
