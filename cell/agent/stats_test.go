package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/kipcell/kip/cell/api/cellv1"
)

func TestParseNetDev(t *testing.T) {
	const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1200      12    0    0    0     0          0         0     1200      12    0    0    0     0       0          0
  eth0: 9876543    4321    3    1    0     0          0         0   123456     789    2    0    0     0       0          0
`
	got, err := parseNetDev([]byte(netDev))
	if err != nil {
		t.Fatal(err)
	}
	want := []*cellv1.InterfaceStats{{Name: "eth0", RxBytes: 9876543, RxErrors: 3, TxBytes: 123456, TxErrors: 2}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("parseNetDev (-want +got):\n%s", diff)
	}

	for name, bad := range map[string]string{
		"no colon":     "h1\nh2\neth0 1 2 3\n",
		"few counters": "h1\nh2\neth0: 1 2 3\n",
		"not a number": "h1\nh2\neth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n",
	} {
		if _, err := parseNetDev([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "big"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hard link is one inode, counted once; a symlink is an inode of its own.
	if err := os.Link(filepath.Join(dir, "sub", "big"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/big", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	u, err := diskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Inodes != 4 { // dir, sub, big (and its link), sym
		t.Errorf("inodes = %d, want 4", u.Inodes)
	}
	if u.Bytes < 64<<10 || u.Bytes > 64<<10+64<<10 {
		t.Errorf("bytes = %d, want 64 KiB of the file plus at most as much for the directories", u.Bytes)
	}
	if _, err := diskUsage(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent dir: %v, want not exist", err)
	}

	fsys, err := filesystemStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fsys.GetHasFilesystem() || fsys.GetCapacityBytes() == 0 || fsys.GetAvailableBytes() > fsys.GetCapacityBytes() {
		t.Errorf("filesystemStats = %v", fsys)
	}
}
