package cli

import (
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/metrics"
)

// runningKip serves cells on an admin server as a running kip does.
func runningKip(t *testing.T, cells []metrics.Cell) *httptest.Server {
	t.Helper()
	m := metrics.New()
	m.SetCells(func() []metrics.Cell { return cells })
	ts := httptest.NewServer(admin.New(m, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(ts.Close)
	return ts
}

func TestCells(t *testing.T) {
	price := 0.0416
	created := time.Now().Add(-3 * time.Hour)
	ts := runningKip(t, []metrics.Cell{
		{Namespace: "default", Pod: "web-1", Instance: "i-0abc", InstanceType: "t3.medium", Zone: "us-east-1a", CapacityType: "spot",
			HourlyPrice: &price, Phase: metrics.CellRunning, Created: created},
		{Namespace: "default", Pod: "odd", Instance: "i-0def", InstanceType: "x1.odd", CapacityType: "on-demand", Phase: metrics.CellBooting, Created: created},
		{Namespace: "jobs", Pod: "big", Phase: metrics.CellPending, PendingReason: "NoInstanceType", Created: created},
	})
	configPath := filepath.Join(t.TempDir(), "kip.yaml")
	if err := os.WriteFile(configPath, []byte("admin:\n  listenAddress: "+strings.TrimPrefix(ts.URL, "http://")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POD           INSTANCE  TYPE       ZONE        CAPACITY   PRICE         PHASE    AGE",
		"default/odd   i-0def    x1.odd     -           on-demand  unknown       Booting  3h",
		"default/web-1 i-0abc    t3.medium  us-east-1a  spot       $0.0416/h     Running  3h",
		"jobs/big      -         -          -           -          -             Pending  3h",
	}
	for _, args := range [][]string{{"cells", "--address", ts.URL}, {"cells", "--config", configPath}} {
		out, errOut, code := runKip(t, args...)
		if code != 0 {
			t.Fatalf("kip %q: exit %d, %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(want) {
			t.Fatalf("kip %q printed:\n%s\nwant %d lines", args, out, len(want))
		}
		for i, line := range lines {
			if strings.Join(strings.Fields(line), " ") != strings.Join(strings.Fields(want[i]), " ") {
				t.Errorf("kip %q line %d = %q, want %q", args, i, line, want[i])
			}
		}
	}
	out, _, code := runKip(t, "cells", "--address", ts.URL, "-o", "json")
	if code != 0 || !strings.Contains(out, `"instanceType": "t3.medium"`) || !strings.Contains(out, `"hourlyPrice": 0.0416`) {
		t.Errorf("kip cells -o json = %q (exit %d)", out, code)
	}
}

func TestCellsWithoutKip(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	_, errOut, code := runKip(t, "cells", "--address", addr)
	if code != 1 || !strings.Contains(errOut, "kip is not reachable at http://"+addr) {
		t.Errorf("kip cells with nothing at %s: exit %d, stderr %q; want exit 1 saying kip is not reachable", addr, code, errOut)
	}
	for _, args := range [][]string{{"cells", "extra"}, {"cells", "-o", "yaml"}} {
		if _, errOut, code := runKip(t, args...); code != 2 || !strings.Contains(errOut, "Usage:") {
			t.Errorf("kip %q: exit %d, want 2 with usage", args, code)
		}
	}
}
