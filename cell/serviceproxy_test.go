package cell

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipcell/kip/cell/clusterip"
)

// fakeCommands puts on PATH (alone) shell scripts named cmds that record
// their arguments in the returned log, one line a call, and print
// nothing; nsenter then runs the command after "--".
func fakeCommands(t *testing.T, cmds ...string) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil || len(sh) == 0 {
		t.Skip("no /bin/sh for the fake commands")
	}
	for _, name := range cmds {
		script := "#!/bin/sh\necho \"" + name + " $*\" >> " + log + "\n"
		if name == "nsenter" {
			script += "shift 2\nexec \"$@\"\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	return log
}

// TestServiceProxy: the agent programs the ClusterIP services with
// iptables where iptables-save, iptables-restore and nsenter are found:
// in the cell's namespace at once, or, where the pod may have a namespace
// of its own, into the one the pod's network (podNetwork) gives it. Where
// one is missing it says why (in its log and to the host) and programs
// none, and the pod still gets its network.
func TestServiceProxy(t *testing.T) {
	const netns = "/proc/1/ns/net"
	web := clusterip.Update{Table: "t", Revision: 1, Services: []clusterip.Service{{Namespace: "default", Name: "web",
		ClusterIPs: []string{"10.96.0.10"}, Ports: []clusterip.Port{{Protocol: "TCP", Port: 80, Endpoints: []clusterip.Endpoint{{IP: "10.0.0.8", Port: 8080}}}}}}}
	tests := []struct {
		name     string
		commands []string
		own      bool   // the pod may have a namespace of its own
		wantWhy  string // why the cell programs none; "": it programs them
	}{
		{name: "cell's namespace", commands: []string{"iptables-save", "iptables-restore", "nsenter"}},
		{name: "pod's network", commands: []string{"iptables-save", "iptables-restore", "nsenter"}, own: true},
		{name: "no iptables", commands: []string{"nsenter"}, own: true,
			wantWhy: `programming services with iptables: exec: "iptables-save": executable file not found in $PATH`},
		{name: "no nsenter", commands: []string{"iptables-save", "iptables-restore"}, own: true,
			wantWhy: `programming services in network namespace /proc/1/ns/net: exec: "nsenter": executable file not found in $PATH`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := fakeCommands(t, tt.commands...)
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, nil))
			cfg := Config{NetNSPath: netns, StateDir: t.TempDir()}
			proxy, podIPTables, why, err := serviceProxy(cfg, tt.own, log)
			if err != nil {
				t.Fatal(err)
			}
			if why != tt.wantWhy || (proxy == nil) != (tt.wantWhy != "") {
				t.Fatalf("serviceProxy: proxy %v, why %q; want why %q", proxy != nil, why, tt.wantWhy)
			}
			if tt.wantWhy != "" && !strings.Contains(logged.String(), "ClusterIP services will not be reachable from this cell") {
				t.Errorf("log %q does not say the services will not be reachable", logged.String())
			}
			if proxy != nil {
				if _, _, err := proxy.Apply(t.Context(), web); err != nil {
					t.Fatalf("Apply: %v", err)
				}
			}
			if network := podNetwork(cfg, tt.own, proxy, podIPTables, log); network != nil {
				path, err := network(t.Context(), "")
				if err != nil || path != netns {
					t.Fatalf("network(\"\") = %q, %v; want the cell's %s", path, err, netns)
				}
			} else if tt.own {
				t.Fatal("no network for a pod that may have a namespace of its own")
			}
			got, _ := os.ReadFile(calls)
			if programmed := strings.Contains(string(got), "nsenter --net="+netns+" -- iptables-restore"); programmed != (tt.wantWhy == "") {
				t.Errorf("commands run:\n%s\nwant iptables-restore in %s: %v", got, netns, tt.wantWhy == "")
			}
		})
	}
}
