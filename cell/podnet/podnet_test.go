package podnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// world is a small network in namespaces of the test's own: "instance"
// plays the cell's instance (where the agent lives and Setup runs), with
// its uplink to "network", which plays the rest of the cloud's network:
// other hosts at 10.99.0.1 and the instance metadata service at
// 169.254.169.254 behind it.
type world struct {
	t                  *testing.T
	instance, network  string // namespace paths
	dir                string // Setup's directory
	instanceAddr, peer string
	pod                netip.Addr
	opts               Options // Setup's
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a pod's network namespace needs root (namespaces, veths, iptables)")
	}
	for _, c := range []string{"ip", "iptables", "iptables-restore", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("a pod's network namespace needs %s: %v", c, err)
		}
	}
	base := t.TempDir()
	w := &world{t: t, instance: filepath.Join(base, "instance"), network: filepath.Join(base, "network"),
		dir: filepath.Join(base, "podnet"), instanceAddr: "10.99.0.2", peer: "10.99.0.1", pod: netip.MustParseAddr("10.99.0.3")}
	for _, ns := range []string{w.instance, w.network} {
		if err := pin(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unmount(ns) })
	}
	w.ip(w.network, "link", "add", "up0", "type", "veth", "peer", "name", "eth0", "netns", w.instance)
	w.ip(w.network, "addr", "add", w.peer+"/24", "dev", "up0")
	w.ip(w.network, "addr", "add", "169.254.169.254/32", "dev", "lo")
	w.ip(w.network, "link", "set", "up0", "up")
	w.ip(w.network, "link", "set", "lo", "up")
	w.ip(w.instance, "addr", "add", w.instanceAddr+"/24", "dev", "eth0")
	w.ip(w.instance, "link", "set", "eth0", "up")
	w.ip(w.instance, "link", "set", "lo", "up")
	w.ip(w.instance, "route", "add", "default", "via", w.peer)
	t.Cleanup(func() {
		bg := context.Background() //nolint:usetesting // a Cleanup: t.Context() has ended
		_ = w.inInstance(func() error { return Teardown(bg, w.dir) })
	})
	return w
}

func unmount(path string) error {
	return exec.Command("umount", "-l", path).Run()
}

// ip runs the ip command in the namespace at ns.
func (w *world) ip(ns string, args ...string) string {
	w.t.Helper()
	out, err := run(context.Background(), "nsenter", append([]string{"--net=" + ns, "--", "ip"}, args...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// inInstance runs fn as the agent would: in the instance's namespace.
func (w *world) inInstance(fn func() error) error {
	var err error
	if derr := Do(w.instance, func() { err = fn() }); derr != nil {
		return derr
	}
	return err
}

// setup runs Setup in the instance and returns the pod's namespace.
func (w *world) setup() string {
	w.t.Helper()
	var path string
	err := w.inInstance(func() error {
		var err error
		path, err = Setup(w.t.Context(), w.dir, w.pod, w.opts)
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return path
}

// serve listens on addr in the namespace at ns and answers every
// connection with its name.
func (w *world) serve(ns, network, addr, name string) {
	w.t.Helper()
	var l net.Listener
	var lerr error
	if err := Do(ns, func() { l, lerr = net.Listen(network, addr) }); err != nil || lerr != nil {
		w.t.Fatal(errors.Join(err, lerr))
	}
	w.t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			_ = c.Close()
		}
	}()
}

// ask connects from the namespace at ns to addr and returns what it
// answered, or the error.
func (w *world) ask(ns, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(w.t.Context(), 2*time.Second)
	defer cancel()
	c, err := DialContext(ctx, &net.Dialer{}, ns, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 64)
	n, err := c.Read(b)
	if n > 0 {
		err = nil
	}
	return string(b[:n]), err
}

func TestPodHasItsOwnNetwork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	podNS := w.setup()
	w.serve(podNS, "tcp", ":8080", "pod")
	w.serve(w.instance, "tcp", w.instanceAddr+":6421", "agent")
	w.serve(w.network, "tcp", w.peer+":80", "peer")
	w.serve(w.network, "tcp", "169.254.169.254:80", "metadata")
	w.serve(w.network, "tcp", "169.254.169.254:53", "metadata dns")

	if got := w.ip(podNS, "-o", "-4", "addr", "show", "dev", PodLink); !strings.Contains(got, " "+w.pod.String()+"/32 ") {
		t.Errorf("the pod's %s: %s, want %s/32", PodLink, got, w.pod)
	}
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"the network reaches the pod at its own address", w.network, w.pod.String() + ":8080", "pod"},
		{"the instance reaches the pod", w.instance, w.pod.String() + ":8080", "pod"},
		{"the pod reaches the network", podNS, w.peer + ":80", "peer"},
		{"the pod reaches the metadata server's DNS", podNS, "169.254.169.254:53", "metadata dns"},
		{"the agent reaches the metadata server", w.instance, "169.254.169.254:80", "metadata"},
		{"the pod does not reach the agent", podNS, w.instanceAddr + ":6421", ""},
		{"the pod does not reach the metadata server", podNS, "169.254.169.254:80", ""},
	} {
		got, err := w.ask(c.from, c.to)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: got %q, want no connection", c.name, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// With Options.Metadata (the operator's KIP_POD_IMDS) the pod reaches the
// instance metadata, and Azure's WireServer stays closed; Setup run again
// without it (an agent restarted with the option off) closes it again.
func TestOperatorOpensTheMetadataToThePod(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.opts.Metadata = true
	podNS := w.setup()
	w.serve(w.network, "tcp", "169.254.169.254:80", "metadata")
	w.ip(w.network, "addr", "add", "168.63.129.16/32", "dev", "lo")
	w.serve(w.network, "tcp", "168.63.129.16:80", "wireserver")
	if got, err := w.ask(podNS, "169.254.169.254:80"); err != nil || got != "metadata" {
		t.Errorf("the pod asked the metadata server with it open: %q, %v", got, err)
	}
	if got, err := w.ask(podNS, "168.63.129.16:80"); err == nil {
		t.Errorf("the pod reached Azure's WireServer: %q", got)
	}
	w.opts.Metadata = false
	w.setup()
	if got, err := w.ask(podNS, "169.254.169.254:80"); err == nil {
		t.Errorf("the pod reached the metadata server after it was closed again: %q", got)
	}
}

func TestWhatThePodDoesInItsNamespaceStaysThere(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	podNS := w.setup()
	w.serve(w.network, "tcp", "169.254.169.254:80", "metadata")
	before := w.ip(w.instance, "-o", "addr", "show")
	// What a pod with NET_ADMIN may do: addresses, routes, and its own
	// firewall, here emptied with an ACCEPT policy.
	w.ip(podNS, "addr", "add", "192.0.2.77/32", "dev", "lo")
	w.ip(podNS, "route", "add", "169.254.169.254/32", "via", Gateway, "dev", PodLink)
	if out, err := run(t.Context(), "nsenter", "--net="+podNS, "--", "iptables", "-w", "5", "-F"); err != nil {
		t.Fatal(out, err)
	}
	if after := w.ip(w.instance, "-o", "addr", "show"); after != before {
		t.Errorf("the instance's addresses changed:\n%s\nwas:\n%s", after, before)
	}
	if got, err := w.ask(podNS, "169.254.169.254:80"); err == nil {
		t.Errorf("after the pod rewrote its own network it reached the metadata server: %q", got)
	}
}

func TestSetupIsIdempotentAndTeardownRemovesAll(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	podNS := w.setup()
	w.serve(podNS, "tcp", ":8080", "pod")
	link := w.ip(w.instance, "-o", "link", "show", "dev", HostLink)
	// An agent started again over the running pod: same namespace, same
	// links, the pod still served.
	if again := w.setup(); again != podNS {
		t.Errorf("second Setup: %s, want %s", again, podNS)
	}
	if got := w.ip(w.instance, "-o", "link", "show", "dev", HostLink); fieldAfter(got, "link/ether") != fieldAfter(link, "link/ether") || strings.Fields(got)[0] != strings.Fields(link)[0] {
		t.Errorf("second Setup made the link anew: %s, was %s", got, link)
	}
	if got, err := w.ask(w.network, w.pod.String()+":8080"); err != nil || got != "pod" {
		t.Errorf("after a second Setup the network reached the pod: %q, %v", got, err)
	}
	rules := func() string {
		var out string
		_ = w.inInstance(func() error {
			var err error
			out, err = run(t.Context(), "iptables-save", "-t", "filter")
			return err
		})
		return out
	}
	if got := strings.Count(rules(), "-j "+InputChain); got != 1 {
		t.Errorf("after two Setups the instance jumps to %s %d times, want once", InputChain, got)
	}

	if err := w.inInstance(func() error { return Teardown(t.Context(), w.dir) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Teardown %s: %v, want gone", w.dir, err)
	}
	if out, err := run(t.Context(), "nsenter", "--net="+w.instance, "--", "ip", "link", "show", "dev", HostLink); err == nil {
		t.Errorf("after Teardown the instance has %s: %s", HostLink, out)
	}
	if got := rules(); strings.Contains(got, "KIP-POD") {
		t.Errorf("after Teardown the instance's filter table has the pod's rules:\n%s", got)
	}
	if err := w.inInstance(func() error { return Teardown(t.Context(), w.dir) }); err != nil {
		t.Errorf("a second Teardown: %v", err)
	}
}

func TestSetupRefusesWhatIsNotAnIPv4Address(t *testing.T) {
	for _, a := range []netip.Addr{{}, netip.MustParseAddr("fd00::3")} {
		if _, err := Setup(t.Context(), t.TempDir(), a, Options{}); err == nil {
			t.Errorf("Setup with %q: no error", a)
		}
	}
}

// TestSetupTakesThePodAddressBackFromTheInstance: a cloud's guest tools
// may have given the pod's address to the instance (Amazon Linux: a
// secondary address on its interface; Compute Engine: a local route for
// an alias IP); Setup takes it back, and the network then reaches the
// pod, not the instance.
func TestSetupTakesThePodAddressBackFromTheInstance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		claim []string
	}{
		{"a secondary address of the interface", []string{"addr", "add", "10.99.0.3/24", "dev", "eth0"}},
		{"a local route", []string{"route", "add", "local", "10.99.0.3/32", "dev", "eth0", "table", "local"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.ip(w.instance, tt.claim...)
			podNS := w.setup()
			w.serve(podNS, "tcp", ":8080", "pod")
			w.serve(w.instance, "tcp", ":8080", "instance")
			if got, err := w.ask(w.network, w.pod.String()+":8080"); err != nil || got != "pod" {
				t.Errorf("the network asked the pod's address: %q, %v; want the pod's answer", got, err)
			}
			if got := w.ip(w.instance, "-o", "-4", "route", "show", "table", "local"); strings.Contains(got, " "+w.pod.String()+" ") {
				t.Errorf("the instance still takes the pod's address for its own: %s", got)
			}
		})
	}
}
