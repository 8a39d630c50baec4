package admin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/metrics"
)

func newTestServer(t *testing.T, m *metrics.Metrics) (*Server, *httptest.Server) {
	t.Helper()
	s := New(m, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestChecks(t *testing.T) {
	failing := func(*http.Request) error { return errors.New("plugin kip-plugin-aws: unavailable") }
	passing := func(*http.Request) error { return nil }
	tests := []struct {
		name     string
		ready    map[string]Check // added in name order: api, leader, plugin
		path     string
		wantCode int
		wantBody string
	}{
		{name: "healthz has ping", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "healthz verbose", path: "/healthz?verbose", wantCode: 200, wantBody: "[+]ping ok\nhealthz check passed\n"},
		{name: "readyz without checks", path: "/readyz", wantCode: 200, wantBody: "ok"},
		{name: "readyz all pass", ready: map[string]Check{"api": passing, "plugin": passing}, path: "/readyz", wantCode: 200, wantBody: "ok"},
		{
			name: "readyz verbose lists each", ready: map[string]Check{"api": passing, "plugin": passing}, path: "/readyz?verbose",
			wantCode: 200, wantBody: "[+]api ok\n[+]plugin ok\nreadyz check passed\n",
		},
		{
			name: "a failing check fails readyz and says why", ready: map[string]Check{"api": passing, "plugin": failing}, path: "/readyz",
			wantCode: 500, wantBody: "[+]api ok\n[-]plugin failed: plugin kip-plugin-aws: unavailable\nreadyz check failed\n",
		},
		{
			name: "an excluded check is not run", ready: map[string]Check{"api": passing, "plugin": failing}, path: "/readyz?exclude=plugin&verbose",
			wantCode: 200, wantBody: "[+]api ok\n[+]plugin excluded: ok\nreadyz check passed\n",
		},
		{name: "one check alone", ready: map[string]Check{"api": passing, "plugin": failing}, path: "/readyz/api", wantCode: 200, wantBody: "ok"},
		{
			name: "one failing check alone", ready: map[string]Check{"api": passing, "plugin": failing}, path: "/readyz/plugin",
			wantCode: 500, wantBody: "[-]plugin failed: plugin kip-plugin-aws: unavailable\n",
		},
		{name: "an unknown check", path: "/readyz/nope", wantCode: 404, wantBody: "no readyz check \"nope\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := newTestServer(t, metrics.New())
			for _, name := range []string{"api", "leader", "plugin"} {
				if c, ok := tt.ready[name]; ok {
					s.AddReadyCheck(name, c)
				}
			}
			code, body := get(t, ts.URL+tt.path)
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("GET %s = %d %q, want %d %q", tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestACheckAddedAgainReplacesIt(t *testing.T) {
	s, ts := newTestServer(t, metrics.New())
	s.AddReadyCheck("plugin", func(*http.Request) error { return errors.New("not started") })
	s.AddReadyCheck("plugin", func(*http.Request) error { return nil })
	if code, body := get(t, ts.URL+"/readyz?verbose"); code != 200 || body != "[+]plugin ok\nreadyz check passed\n" {
		t.Errorf("GET /readyz?verbose = %d %q, want the second check alone", code, body)
	}
}

func TestMetricsAndCells(t *testing.T) {
	m := metrics.New()
	price := 0.0416
	m.SetCells(func() []metrics.Cell {
		return []metrics.Cell{
			{Namespace: "default", Pod: "web-b", Phase: metrics.CellBooting, PendingReason: "ContainerCreating"},
			{Namespace: "default", Pod: "web-a", Instance: "i-1", InstanceType: "t3.medium", HourlyPrice: &price, Phase: metrics.CellRunning},
		}
	})
	m.PluginCall("Launch", metrics.OutcomeOK, 0)
	s, ts := newTestServer(t, m)
	s.SetAccess(&fakeAccess{users: map[string]User{"t": {Name: "kip-cells"}},
		grants: map[string]map[string]bool{"kip-cells": {"get /metrics": true, "get /cells": true}}})

	code, body := request(t, http.MethodGet, ts.URL+"/metrics", "t")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{`kip_plugin_calls_total{method="Launch",outcome="ok"} 1`, `kip_cells{phase="Running"} 1`, `kip_pending_pods{reason="ContainerCreating"} 1`, "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}

	if _, err := Cells(t.Context(), ts.URL, ""); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("Cells without a token = %v, want 401 saying what to pass", err)
	}
	cells, err := Cells(t.Context(), ts.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cells {
		names = append(names, c.Pod)
	}
	if diff := cmp.Diff([]string{"web-a", "web-b"}, names); diff != "" {
		t.Errorf("cells, by name (-want +got):\n%s", diff)
	}
	if cells[0].HourlyPrice == nil || *cells[0].HourlyPrice != price || cells[1].HourlyPrice != nil {
		t.Errorf("prices = %v, %v; want %v and unknown", cells[0].HourlyPrice, cells[1].HourlyPrice, price)
	}
}

func TestCellsWhenKipIsNotThere(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	_, err = Cells(t.Context(), addr, "")
	if err == nil || !strings.Contains(err.Error(), "kip is not reachable at http://"+addr) {
		t.Errorf("Cells of nobody = %v, want it to say kip is not reachable at %s", err, addr)
	}
}

func TestServeEndsWithTheContext(t *testing.T) {
	lis, err := Listen(Config{ListenAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s := New(metrics.New(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	if code, _ := get(t, "http://"+lis.Addr().String()+"/healthz"); code != 200 {
		t.Errorf("GET /healthz = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v after its context ended, want nil", err)
	}
	if _, err := Listen(Config{ListenAddress: lis.Addr().String()}); err != nil {
		t.Errorf("the port was not released: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{DefaultConfig(), ""},
		{Config{ListenAddress: "0.0.0.0:0", Authorization: AuthorizationCluster}, ""},
		{Config{ListenAddress: ":10262", Authorization: AuthorizationNone}, ""},
		{Config{ListenAddress: "nonsense", Off: true}, ""},
		{Config{ListenAddress: "10262", Authorization: AuthorizationCluster}, `listenAddress: "10262" is not host:port`},
		{Config{ListenAddress: "localhost:http", Authorization: AuthorizationCluster}, `listenAddress: "localhost:http" is not host:port (the port is no number from 0 to 65535)`},
		{Config{ListenAddress: DefaultListenAddress, Authorization: "open"}, `authorization: "open": want cluster or none`},
		{Config{ListenAddress: DefaultListenAddress}, `authorization: "": want cluster or none`},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

func TestURLOf(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:10262": "http://127.0.0.1:10262",
		"0.0.0.0:10262":   "http://127.0.0.1:10262",
		":9000":           "http://127.0.0.1:9000",
		"[::]:9000":       "http://127.0.0.1:9000",
		"10.0.0.5:10262":  "http://10.0.0.5:10262",
	} {
		if got := URLOf(in); got != want {
			t.Errorf("URLOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// Runtime profiles are served only with admin.profiling.
func TestProfiling(t *testing.T) {
	tests := []struct {
		name    string
		enable  bool
		want    int
		wantHas string
	}{
		{name: "off by default", want: http.StatusNotFound},
		{name: "on", enable: true, want: http.StatusOK, wantHas: "heap profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(metrics.New(), slog.New(slog.DiscardHandler))
			s.AllowAnyone()
			if tt.enable {
				s.EnableProfiling()
			}
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			code, body := get(t, ts.URL+PathPprof+"heap?debug=1")
			if code != tt.want || !strings.Contains(body, tt.wantHas) {
				t.Errorf("GET %sheap = %d, %.80q; want %d with %q", PathPprof, code, body, tt.want, tt.wantHas)
			}
		})
	}
}

// TestHandleProtected: a handler added while the server serves answers
// only callers authorized for its path (each file of a subtree its own
// non-resource URL), as /cells does; a path nobody handles is 404 without
// asking for a token.
func TestHandleProtected(t *testing.T) {
	s, ts := newTestServer(t, metrics.New())
	access := &fakeAccess{users: map[string]User{"kip": {Name: "kip"}, "other": {Name: "other"}},
		grants: map[string]map[string]bool{"kip": {"get /keptlogs": true, "get /keptlogs/a/b.log": true}}}
	s.SetAccess(access)
	s.HandleProtected("/keptlogs", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "list") }))
	s.HandleProtected("/keptlogs/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "file "+r.URL.Path) }))
	for _, tc := range []struct {
		path, token string
		wantCode    int
		wantBody    string
	}{
		{path: "/keptlogs", token: "kip", wantCode: 200, wantBody: "list"},
		{path: "/keptlogs/a/b.log", token: "kip", wantCode: 200, wantBody: "file /keptlogs/a/b.log"},
		{path: "/keptlogs", wantCode: 401},
		{path: "/keptlogs", token: "forged", wantCode: 401},
		{path: "/keptlogs", token: "other", wantCode: 403},
		{path: "/keptlogs/a/c.log", token: "kip", wantCode: 403},
		{path: "/nothing", wantCode: 404},
	} {
		t.Run(tc.path+" "+tc.token, func(t *testing.T) {
			code, body := request(t, http.MethodGet, ts.URL+tc.path, tc.token)
			if code != tc.wantCode || tc.wantBody != "" && body != tc.wantBody {
				t.Errorf("GET %s with token %q = %d %q, want %d %q", tc.path, tc.token, code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestHandleProtectedRefusesTheServersOwnPaths(t *testing.T) {
	for _, pattern := range []string{"/", "/cells", "/metrics/x", "/debug/", "/readyz/"} {
		t.Run(pattern, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("HandleProtected(%q) did not panic", pattern)
				}
			}()
			New(metrics.New(), slog.New(slog.DiscardHandler)).HandleProtected(pattern, http.NotFoundHandler())
		})
	}
}
