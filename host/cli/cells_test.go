package cli

import (
	"context"
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

// readerToken is the token runningKip's cluster lets get /cells.
const readerToken = "reader-token"

// cellsReader is an admin.Access that knows readerToken, whose user may
// get /cells, and no other token.
type cellsReader struct{}

func (cellsReader) Authenticate(_ context.Context, token string) (admin.User, bool, error) {
	return admin.User{Name: "reader"}, token == readerToken, nil
}

func (cellsReader) Authorize(_ context.Context, u admin.User, verb, path string) (bool, string, error) {
	return u.Name == "reader" && verb == "get" && path == admin.PathCells, "", nil
}

// runningKip serves cells on an admin server as a running kip does, to
// readerToken.
func runningKip(t *testing.T, cells []metrics.Cell) *httptest.Server {
	t.Helper()
	m := metrics.New()
	m.SetCells(func() []metrics.Cell { return cells })
	s := admin.New(m, slog.New(slog.DiscardHandler))
	s.SetAccess(cellsReader{})
	ts := httptest.NewServer(s.Handler())
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
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(readerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "kip.yaml")
	if err := os.WriteFile(configPath, []byte("admin:\n  listenAddress: "+strings.TrimPrefix(ts.URL, "http://")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POD           INSTANCE  TYPE       ZONE        CAPACITY   PRICE         PHASE    AGE",
		"default/odd   i-0def    x1.odd     -           on-demand  unknown       Booting  3h",
		"default/web-1 i-0abc    t3.medium  us-east-1a  spot       $0.0416/h     Running  3h",
		"jobs/big      -         -          -           -          -             Pending  3h",
	}
	for _, args := range [][]string{
		{"cells", "--address", ts.URL, "--token-file", tokenFile},
		{"cells", "--config", configPath, "--token", readerToken},
	} {
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
	out, _, code := runKip(t, "cells", "--address", ts.URL, "-o", "json", "--token-file", tokenFile)
	if code != 0 || !strings.Contains(out, `"instanceType": "t3.medium"`) || !strings.Contains(out, `"hourlyPrice": 0.0416`) {
		t.Errorf("kip cells -o json = %q (exit %d)", out, code)
	}
}

// Without a token, or with one not allowed, kip cells says what it
// needs.
func TestCellsWithoutAToken(t *testing.T) {
	ts := runningKip(t, nil)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"cells", "--address", ts.URL}, "401 Unauthorized: Unauthorized (kip serves /cells to a token the cluster authenticates: pass one with --token-file or --token"},
		{[]string{"cells", "--address", ts.URL, "--token", "stale"}, "401 Unauthorized"},
		{[]string{"cells", "--address", ts.URL, "--token-file", filepath.Join(t.TempDir(), "none")}, "reading --token-file: open"},
	}
	for _, tt := range tests {
		if _, errOut, code := runKip(t, tt.args...); code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("kip %q: exit %d, stderr %q; want exit 1 saying %q", tt.args, code, errOut, tt.want)
		}
	}
	if _, errOut, code := runKip(t, "cells", "--token", "a", "--token-file", "b"); code != 2 || !strings.Contains(errOut, "give one") {
		t.Errorf("kip cells --token --token-file: exit %d, %q; want 2 with usage", code, errOut)
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
