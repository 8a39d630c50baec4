package modbuild

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAtLeast(t *testing.T) {
	tests := []struct {
		have, want string
		ok         bool
	}{
		{"go1.26.8", "1.26.0", true},
		{"go1.26.0", "1.26.0", true},
		{"go1.25.9", "1.26.0", false},
		{"go1.27rc1", "1.26.0", true},
		{"go1.26.8", "1.27", false},
	}
	for _, tt := range tests {
		if got := AtLeast(tt.have, tt.want); got != tt.ok {
			t.Errorf("AtLeast(%s, %s) = %t, want %t", tt.have, tt.want, got, tt.ok)
		}
	}
}

func TestGoDirective(t *testing.T) {
	tests := []struct{ mod, want string }{
		{"module github.com/coredns/coredns\n\n// a comment\ngo 1.26.0\n\nrequire x v1\n", "1.26.0"},
		{"module m\ngo 1.25\n", "1.25"},
		{"module m\n", "1.0"},
	}
	for _, tt := range tests {
		if got := GoDirective([]byte(tt.mod)); got != tt.want {
			t.Errorf("GoDirective(%q) = %q, want %q", tt.mod, got, tt.want)
		}
	}
}

func TestCheckGo(t *testing.T) {
	mod := []byte("module github.com/coredns/coredns\n\ngo 1.26.0\n")
	if err := CheckGo("go1.26.8", "coredns v1.15.0", mod); err != nil {
		t.Errorf("CheckGo(go1.26.8) = %v, want nil", err)
	}
	err := CheckGo("go1.25.3", "coredns v1.15.0", mod)
	if err == nil {
		t.Fatal("CheckGo(go1.25.3) = nil, want an error")
	}
	for _, want := range []string{"coredns v1.15.0 needs Go 1.26.0 or newer", "go1.25.3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckGo(go1.25.3) = %q, want it to say %q", err, want)
		}
	}
}

// TestCurrent checks that a binary directory counts as built only with
// the same stamp and every binary present and executable.
func TestCurrent(t *testing.T) {
	const stamp = "coredns=v1.15.0 go=go1.26.8"
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  bool
	}{
		{"built", func(t *testing.T, dir string) { writeBin(t, dir, "coredns", 0o755); stampDir(t, dir, stamp) }, true},
		{"no stamp", func(t *testing.T, dir string) { writeBin(t, dir, "coredns", 0o755) }, false},
		{"other Go", func(t *testing.T, dir string) {
			writeBin(t, dir, "coredns", 0o755)
			stampDir(t, dir, "coredns=v1.15.0 go=go1.26.7")
		}, false},
		{"binary missing", func(t *testing.T, dir string) { stampDir(t, dir, stamp) }, false},
		{"binary not executable", func(t *testing.T, dir string) { writeBin(t, dir, "coredns", 0o644); stampDir(t, dir, stamp) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			if got := Current(dir, stamp, "coredns"); got != tt.want {
				t.Errorf("Current = %t, want %t", got, tt.want)
			}
		})
	}
}

func writeBin(t *testing.T, dir, name string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func stampDir(t *testing.T, dir, stamp string) {
	t.Helper()
	if err := WriteStamp(dir, stamp); err != nil {
		t.Fatal(err)
	}
}

func TestScratchModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "src")
	mod := "module local/kip-test-build\n\ngo 1.26.0\n"
	if err := ScratchModule(dir, []byte(mod)); err != nil {
		t.Fatal(err)
	}
	// The scratch module is one a go command can load outside the
	// workspace: it lists its own empty package.
	got, err := Output(t.Context(), dir, "list", "-m")
	if err != nil {
		t.Fatal(err)
	}
	if got != "local/kip-test-build" {
		t.Errorf("go list -m in the scratch module = %q, want local/kip-test-build", got)
	}
}

// TestRunQuotesTheEnd runs a go command that fails and checks the error
// quotes the end of what it printed, not its whole output.
func TestRunQuotesTheEnd(t *testing.T) {
	dir := t.TempDir()
	fakeGo := "#!/bin/sh\nfor i in $(seq 1 30); do echo \"line $i\" >&2; done\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var log strings.Builder
	err := Run(t.Context(), "", &log, "build", "./...")
	if err == nil {
		t.Fatal("Run of a failing go = nil")
	}
	if !strings.Contains(err.Error(), "line 30") || strings.Contains(err.Error(), "line 10\n") {
		t.Errorf("Run error = %q, want the last 20 lines only", err)
	}
	if !strings.Contains(log.String(), "line 1\n") {
		t.Errorf("log = %q, want every line", log.String())
	}
}

func TestMainImports(t *testing.T) {
	const module = "github.com/coredns/coredns"
	tests := []struct {
		name, main string
		want       []string
		err        string
	}{
		{name: "the module's packages, in order, without the standard library's or another module's",
			main: "package main\n\nimport (\n\t\"fmt\"\n\t\"github.com/coredns/coredns/coremain\"\n\t_ \"github.com/coredns/coredns/plugin/cache\"\n\t_ \"github.com/coredns/corednsx/plugin\"\n)\n\nfunc main() { fmt.Println(); coremain.Run() }\n",
			want: []string{"github.com/coredns/coredns/coremain", "github.com/coredns/coredns/plugin/cache"}},
		{name: "the module's root package", main: "package main\n\nimport _ \"github.com/coredns/coredns\"\n", want: []string{module}},
		{name: "nothing of the module", main: "package main\n\nimport \"fmt\"\n", err: "imports no package of github.com/coredns/coredns"},
		{name: "not Go", main: "main() {}", err: "parsing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MainImports(tt.main, module)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("MainImports = %q, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("MainImports = %q, want %q", got, tt.want)
			}
		})
	}
}
