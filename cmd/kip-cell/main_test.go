package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the tests run this binary as kip-cell: with nfs-fuse as
// its first argument it is main, as the agent runs /proc/self/exe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "nfs-fuse" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestNFSFuseDispatch: "kip-cell nfs-fuse" is the FUSE NFS mount's process
// (cell/nfsfuse.Main), with its own flags, before kip-cell's are parsed.
func TestNFSFuseDispatch(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"its own flags", []string{"-server", "10.0.0.5", "-export", "share", "-target", "/mnt"}, `export \"share\" is not an absolute path`},
		{"not kip-cell's", []string{"-state-dir", "/x"}, "flag provided but not defined: -state-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], append([]string{"nfs-fuse"}, tt.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("exit: %v, want code 2", err)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.want)
			}
		})
	}
}
