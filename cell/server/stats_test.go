package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/cell/api"
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
	want := []api.InterfaceStats{{Name: "eth0", RxBytes: 9876543, RxErrors: 3, TxBytes: 123456, TxErrors: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
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

func TestFilesystemStats(t *testing.T) {
	dir := t.TempDir()
	fsys, err := filesystemStats(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fsys.HasFilesystem || fsys.CapacityBytes == 0 || fsys.AvailableBytes > fsys.CapacityBytes {
		t.Errorf("filesystemStats = %v", fsys)
	}
}
