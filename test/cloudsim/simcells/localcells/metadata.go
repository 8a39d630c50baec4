package localcells

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kipcell/kip/cell/podnet"
)

// The instance metadata where the clouds serve it. EC2, Compute Engine
// and Azure answer at 169.254.169.254:80, off the instance: the
// instance's own network routes there, and a pod in a network namespace
// of its own reaches it only if its instance forwards the pod's packets.
// With Config.Metadata, LocalCells gives each cell the same: a network
// namespace beside the cell's (simmd-<hash of the instance ID>) holds
// 169.254.169.254 on the end of a veth pair whose other end (kipmeta) is
// in the cell's namespace, with a route there to 169.254.169.254, and
// forwarding and proxy ARP on it (so that answers to a pod's address,
// which the cell routes, find their way back, as through a cloud
// instance's uplink); a listener in that namespace passes each
// connection on to the instance's metadata socket (IMDSSocket), which the
// simulator serves. So the cell's agent reaches its metadata at the
// cloud's address, and a pod of the cell reaches it exactly when the
// cell's namespace forwards its packets there (cell/podnet drops them).
// Nothing of it is in this machine's own network namespace, where a real
// cloud's metadata may answer at that address.

// MetadataAddress is where the clouds serve an instance's metadata.
const MetadataAddress = "169.254.169.254"

// metadataLink is the cell's end of the veth pair to the metadata's
// namespace; eth0 is the other end, in that namespace.
const metadataLink = "kipmeta"

// metadataNet is one cell's metadata namespace and its listener.
type metadataNet struct {
	netns string
	ln    net.Listener
	done  chan struct{} // closed once the listener's loop has ended
}

// metadataNetns names the metadata namespace of an instance's cell.
func metadataNetns(instanceID string) string {
	sum := sha256.Sum256([]byte(instanceID))
	return "simmd-" + hex.EncodeToString(sum[:6])
}

// serveMetadata gives the cell of instanceID, whose namespace holds
// cellAddress, its metadata at MetadataAddress.
func (c *LocalCells) serveMetadata(ctx context.Context, instanceID, cellAddress string) error {
	cellNS, err := Netns(ctx, cellAddress)
	if err != nil {
		return fmt.Errorf("serving the metadata of %s: %w", instanceID, err)
	}
	md := &metadataNet{netns: metadataNetns(instanceID), done: make(chan struct{})}
	// A namespace left by an earlier start of the same instance (a
	// retried Start) is made again.
	_ = deleteNetns(ctx, md.netns)
	steps := [][]string{
		{"ip", "netns", "add", md.netns},
		{"ip", "-n", cellNS, "link", "add", metadataLink, "type", "veth", "peer", "name", "eth0", "netns", md.netns},
		{"ip", "-n", md.netns, "addr", "add", MetadataAddress + "/32", "dev", "eth0"},
		{"ip", "-n", md.netns, "link", "set", "lo", "up"},
		{"ip", "-n", md.netns, "link", "set", "eth0", "up"},
		{"ip", "-n", md.netns, "route", "add", "default", "dev", "eth0"},
		{"ip", "-n", cellNS, "link", "set", metadataLink, "up"},
		{"ip", "-n", cellNS, "route", "replace", MetadataAddress + "/32", "dev", metadataLink},
		// Forwarding and proxy ARP on the cell's end, as cell/podnet sets
		// them on the instance's uplink, which leads to the metadata on a
		// cloud: answers to a pod come back through it.
		{"ip", "netns", "exec", cellNS, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/" + metadataLink + "/forwarding && " +
			"echo 1 > /proc/sys/net/ipv4/conf/" + metadataLink + "/proxy_arp && " +
			"echo 0 > /proc/sys/net/ipv4/neigh/" + metadataLink + "/proxy_delay"},
	}
	for _, argv := range steps {
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			_ = deleteNetns(ctx, md.netns)
			return fmt.Errorf("serving the metadata of %s: %s: %w: %s", instanceID, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
	}
	var lerr error
	err = podnet.Do(NetnsPath(md.netns), func() { md.ln, lerr = net.Listen("tcp", MetadataAddress+":80") })
	if err = errors.Join(err, lerr); err != nil {
		_ = deleteNetns(ctx, md.netns)
		return fmt.Errorf("serving the metadata of %s: %w", instanceID, err)
	}
	socket := c.IMDSSocket(instanceID)
	go func() {
		defer close(md.done)
		forward(md.ln, socket, c.log.With("instance", instanceID))
	}()
	c.mu.Lock()
	c.metadatas[instanceID] = md
	c.mu.Unlock()
	c.log.Info("instance metadata served", "instance", instanceID, "netns", md.netns, "cell_netns", cellNS, "address", MetadataAddress)
	return nil
}

// stopMetadata stops serving the metadata of instanceID's cell and
// deletes its namespace (and so the veth pair).
func (c *LocalCells) stopMetadata(ctx context.Context, instanceID string) error {
	c.mu.Lock()
	md := c.metadatas[instanceID]
	delete(c.metadatas, instanceID)
	c.mu.Unlock()
	if md == nil {
		return nil
	}
	_ = md.ln.Close()
	<-md.done
	return deleteNetns(ctx, md.netns)
}

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/var/run/netns"

// deleteNetns deletes a named network namespace; one that is gone is not
// an error.
func deleteNetns(ctx context.Context, name string) error {
	if _, err := os.Stat(NetnsPath(name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting network namespace %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Netns returns the name of the network namespace (of those iproute2
// names) that holds the IPv4 address addr: a local cell's, in netns mode.
func Netns(ctx context.Context, addr string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return "", fmt.Errorf("listing network namespaces: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		addrs, err := exec.CommandContext(ctx, "ip", "-n", f[0], "-4", "-o", "addr", "show").Output()
		if err == nil && strings.Contains(string(addrs), " "+addr+"/") {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("finding the network namespace of %s: no namespace holds it", addr)
}

// NetnsPath is the path of the network namespace iproute2 names name,
// for cell/podnet's Do and DialContext.
func NetnsPath(name string) string { return filepath.Join(netnsDir, name) }

// forward passes each connection ln accepts on to the unix socket,
// byte for byte, until ln is closed. A client that has sent all it had
// (nc at the end of its input) still gets the answer, as from the cloud's
// metadata, which does not take a half-closed connection for a gone
// client: the socket's side is not half-closed in turn, but given
// forwardLinger to answer and close.
func forward(ln net.Listener, socket string, log *slog.Logger) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			up, err := net.Dial("unix", socket)
			if err != nil {
				log.Warn("reaching the instance's metadata socket failed", "socket", socket, "error", err)
				return
			}
			defer up.Close()
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				_, _ = io.Copy(conn, up)
				_ = conn.Close()
			}()
			_, _ = io.Copy(up, conn)
			_ = up.SetReadDeadline(time.Now().Add(forwardLinger))
			<-answered
		}()
	}
}

// forwardLinger is how long the metadata socket has to answer once the
// client has sent all it had.
const forwardLinger = 30 * time.Second
