package clusterip

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The addresses of the test namespace: documentation ranges (RFC 5737),
// inside a namespace of the test's own that nothing routes to.
const (
	podAddr   = "198.51.100.10"
	clusterIP = "203.0.113.1"
)

// TestIPTablesServesClusterIPs programs a real network namespace and
// talks through the rules: a TCP and a UDP Service with two endpoints
// each (local listeners, so a DNAT to them is a pod reaching itself),
// balancing, ClientIP affinity, a port without endpoints, and a second
// agent taking over the namespace.
func TestIPTablesServesClusterIPs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and iptables need root")
	}
	ns := newNetns(t)
	for _, port := range []string{"8081", "8082"} {
		serveTCP(t, ns, net.JoinHostPort(podAddr, port), "tcp-"+port)
		serveUDP(t, ns, net.JoinHostPort(podAddr, port), "udp-"+port)
	}
	table := func(affinity int32) []Service {
		eps := []Endpoint{{IP: podAddr, Port: 8081}, {IP: podAddr, Port: 8082}}
		return []Service{
			{Namespace: "default", Name: "web", ClusterIPs: []string{clusterIP}, AffinitySeconds: affinity, Ports: []Port{
				{Name: "http", Protocol: "TCP", Port: 80, Endpoints: eps},
				{Name: "dns", Protocol: "UDP", Port: 53, Endpoints: eps},
				{Name: "idle", Protocol: "TCP", Port: 81},
			}},
		}
	}
	log := slog.New(slog.DiscardHandler)
	ipt, err := NewIPTables(ns, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := ipt.Program(t.Context(), table(0)); err != nil {
		t.Fatal(err)
	}
	tcp, udp := net.JoinHostPort(clusterIP, "80"), net.JoinHostPort(clusterIP, "53")
	if got := answers(t, ns, "tcp", tcp, 40); len(got) != 2 {
		t.Errorf("TCP answers through the ClusterIP: %v, want both endpoints", got)
	}
	if got := answers(t, ns, "udp", udp, 40); len(got) != 2 {
		t.Errorf("UDP answers through the ClusterIP: %v, want both endpoints", got)
	}
	_, err = inNetns(ns, func() (string, error) { return ask("tcp", net.JoinHostPort(clusterIP, "81")) })
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port without endpoints: %v, want connection refused", err)
	}

	if err := ipt.Program(t.Context(), table(60)); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, ns, "tcp", tcp, 20); len(got) != 1 {
		t.Errorf("TCP answers with ClientIP affinity: %v, want one endpoint", got)
	}

	// A new agent (its IPTables knows nothing) takes the namespace over:
	// it replaces the chains, removes those of a Service gone, and keeps
	// one OUTPUT rule per table.
	next, err := NewIPTables(ns, log)
	if err != nil {
		t.Fatal(err)
	}
	other := []Service{{Namespace: "default", Name: "other", ClusterIPs: []string{"203.0.113.2"},
		Ports: []Port{{Protocol: "TCP", Port: 80, Endpoints: []Endpoint{{IP: podAddr, Port: 8081}}}}}}
	if err := next.Program(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	saved := run(t, "ip", "netns", "exec", filepath.Base(ns), "iptables-save")
	for _, chain := range []string{chainName(svcPrefix, "default/web:http/tcp"), chainName(svcPrefix, "default/web:dns/udp")} {
		if strings.Contains(saved, chain) {
			t.Errorf("chain %s of a Service gone is still there:\n%s", chain, saved)
		}
	}
	if n := strings.Count(saved, "-A OUTPUT -m comment --comment \"kip cell: ClusterIP services\" -j KIP-SERVICES"); n != 2 {
		t.Errorf("%d OUTPUT rules for KIP-SERVICES, want one per table:\n%s", n, saved)
	}
	if got := answers(t, ns, "tcp", net.JoinHostPort("203.0.113.2", "80"), 3); len(got) != 1 || !got["tcp-8081"] {
		t.Errorf("the new table's Service answers %v, want tcp-8081", got)
	}
}

// answers asks addr n times from inside ns and returns who answered.
func answers(t *testing.T, ns, network, addr string, n int) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for range n {
		got, err := inNetns(ns, func() (string, error) { return ask(network, addr) })
		if err != nil {
			t.Fatalf("asking %s %s: %v", network, addr, err)
		}
		seen[got] = true
	}
	return seen
}

// ask sends a line to addr and reads one back.
func ask(network, addr string) (string, error) {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("who\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// newNetns creates a network namespace with lo up and podAddr on one end
// of a veth pair (both ends inside) that holds the default route, and returns its path.
func newNetns(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "kipsvc-" + hex.EncodeToString(b)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"addr", "add", podAddr + "/24", "dev", "v0"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
		{"route", "add", "default", "dev", "v0"},
	} {
		run(t, "ip", append([]string{"-n", name}, args...)...)
	}
	return "/var/run/netns/" + name
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serveTCP answers every connection to addr in ns with name.
func serveTCP(t *testing.T, ns, addr, name string) {
	t.Helper()
	l, err := inNetns(ns, func() (net.Listener, error) { return net.Listen("tcp", addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, name)
			_ = c.Close()
		}
	}()
}

// serveUDP answers every datagram to addr in ns with name.
func serveUDP(t *testing.T, ns, addr, name string) {
	t.Helper()
	pc, err := inNetns(ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", addr) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name+"\n"), from)
		}
	}()
}

// inNetns runs fn on a thread inside the namespace at path: sockets it
// creates belong to that namespace. The thread goes back to its own
// namespace, or dies with its goroutine if it cannot.
func inNetns[T any](path string, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var zero T
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			ch <- result{zero, err}
			return
		}
		defer own.Close()
		target, err := os.Open(path)
		if err != nil {
			ch <- result{zero, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{zero, err}
			return
		}
		v, err := fn()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// TestIPTablesIn: In makes an IPTables whose commands run in another
// namespace, and leaves the one it came from as it was.
func TestIPTablesIn(t *testing.T) {
	dir := t.TempDir()
	// A stand-in nsenter that says what it was asked to run.
	if err := os.WriteFile(filepath.Join(dir, "nsenter"), []byte("#!/bin/sh\necho \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	cell := newIPTables("/proc/1/ns/net", slog.New(slog.DiscardHandler))
	pod := cell.In("/run/kip/podnet/net")
	for _, tt := range []struct {
		name string
		ipt  *IPTables
		want string
	}{
		{name: "the pod's", ipt: pod, want: "--net=/run/kip/podnet/net -- iptables-save"},
		{name: "the cell's", ipt: cell, want: "--net=/proc/1/ns/net -- iptables-save"},
	} {
		out, err := tt.ipt.run(t.Context(), nil, iptablesSave)
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("%s: ran %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
