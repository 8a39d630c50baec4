package nfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kipcell/kip/cell/api/share"
)

// Share is an NFS export a pod mounts.
type Share struct {
	// Server is a host name or an address.
	Server string
	// Path is the exported path.
	Path string
	// ReadOnly mounts it read-only.
	ReadOnly bool
	// Options are mount options as nfs(5) spells them (a PV's
	// mountOptions).
	Options []string
}

// String names the share as mount(8) does: server:/path.
func (s Share) String() string { return s.Server + ":" + s.Path }

// Mounter mounts shares. Its zero value mounts with the kernel's client
// only.
type Mounter struct {
	// FUSE mounts a share with the agent's own NFSv3 client where the
	// kernel has none (cell/nfsfuse, run as a child process): addr is the
	// server's checked address, opts the share's options. Nil: no
	// fallback.
	FUSE func(ctx context.Context, addr netip.Addr, s Share, target string) error
	// Lookup resolves a server's name; nil: the system's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// OwnAddrs are the instance's own addresses, which a share's server
	// may not be; nil: those of this network namespace's interfaces.
	OwnAddrs func() ([]netip.Addr, error)
	// KernelMount is mount(2); nil: unix.Mount. Tests replace it.
	KernelMount func(source, target, fstype string, flags uintptr, data string) error
}

// ErrRefused marks a share whose server a cell may not mount from.
var ErrRefused = errors.New("server refused")

// Mount mounts s on target (an existing directory): the server's
// addresses checked, with the kernel's client, else the agent's own.
func (m *Mounter) Mount(ctx context.Context, s Share, target string) error {
	if s.Server == "" || !strings.HasPrefix(s.Path, "/") {
		return fmt.Errorf("mounting %s: the share needs a server and an absolute path", s)
	}
	addr, err := m.resolve(ctx, s.Server)
	if err != nil {
		return fmt.Errorf("mounting %s: %w", s, err)
	}
	opts, err := parseOptions(s.Options, s.ReadOnly)
	if err != nil {
		return fmt.Errorf("mounting %s: %w", s, err)
	}
	err = m.kernel(ctx, addr, s, opts, target)
	if !errors.Is(err, unix.ENODEV) {
		if err != nil {
			return fmt.Errorf("mounting %s: %w", s, err)
		}
		return nil
	}
	// The kernel has no NFS client.
	if m.FUSE == nil {
		return fmt.Errorf("mounting %s: the cell's kernel has no NFS client", s)
	}
	if v := opts.versions(); !slices.Contains(v, "3") {
		return fmt.Errorf("mounting %s: NFS %s needs the kernel's NFS client, and this cell's kernel has none (the agent's own client speaks NFS 3)", s, v[0])
	}
	if err := m.FUSE(ctx, addr, s, target); err != nil {
		return fmt.Errorf("mounting %s with the agent's NFS client: %w", s, err)
	}
	return nil
}

// resolve answers the server's address: every address its name resolves
// to must be one a pod may have its cell reach; the first IPv4 one is
// taken, as mount.nfs prefers.
func (m *Mounter) resolve(ctx context.Context, server string) (netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(server, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := m.Lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(ctx, server); err != nil {
			return netip.Addr{}, fmt.Errorf("resolving %s: %w", server, err)
		}
		if len(addrs) == 0 {
			return netip.Addr{}, fmt.Errorf("resolving %s: no address", server)
		}
	}
	own, err := m.ownAddrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		a = a.Unmap()
		why := share.Refused(a)
		if why == "" && slices.Contains(own, a) {
			why = "it is the instance's own address"
		}
		if why != "" {
			return netip.Addr{}, fmt.Errorf("%w: %s resolves to %s, and %s", ErrRefused, server, a, why)
		}
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return addrs[0], nil
}

func (m *Mounter) ownAddrs() ([]netip.Addr, error) {
	if m.OwnAddrs != nil {
		return m.OwnAddrs()
	}
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the instance's addresses: %w", err)
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// options are a share's mount options, split as mount(8) splits them:
// the generic ones into flags, the NFS ones into the kernel's data.
type options struct {
	flags uintptr
	// version and minor are vers=/nfsvers= and minorversion=, "" when
	// not given.
	version, minor string
	// data are the other options, for the kernel.
	data []string
}

// genericFlags are mount(8)'s generic options that set a flag; their
// opposites clear it.
var genericFlags = map[string]uintptr{
	"ro": unix.MS_RDONLY, "noatime": unix.MS_NOATIME, "nodiratime": unix.MS_NODIRATIME,
	"relatime": unix.MS_RELATIME, "strictatime": unix.MS_STRICTATIME, "nosuid": unix.MS_NOSUID,
	"noexec": unix.MS_NOEXEC, "sync": unix.MS_SYNCHRONOUS, "dirsync": unix.MS_DIRSYNC, "nodev": unix.MS_NODEV,
}

var genericClears = map[string]uintptr{
	"rw": unix.MS_RDONLY, "atime": unix.MS_NOATIME, "diratime": unix.MS_NODIRATIME, "norelatime": unix.MS_RELATIME,
	"suid": unix.MS_NOSUID, "exec": unix.MS_NOEXEC, "async": unix.MS_SYNCHRONOUS,
}

// parseOptions splits a share's options (each may hold several, comma
// separated, as a PV's mountOptions may). readOnly wins over rw; nodev
// is always set.
func parseOptions(list []string, readOnly bool) (options, error) {
	var o options
	for _, item := range list {
		for opt := range strings.SplitSeq(item, ",") {
			opt = strings.TrimSpace(opt)
			key, val, _ := strings.Cut(opt, "=")
			switch {
			case opt == "":
			case genericFlags[opt] != 0:
				o.flags |= genericFlags[opt]
			case genericClears[opt] != 0:
				o.flags &^= genericClears[opt]
			case opt == "dev", opt == "defaults", opt == "auto", opt == "noauto", opt == "_netdev":
				// dev is refused silently: a share is always nodev.
			case key == "vers" || key == "nfsvers":
				major, minor, ok := strings.Cut(val, ".")
				if major != "3" && major != "4" || ok && (major != "4" || minor == "") {
					return o, fmt.Errorf("mount option %s: a cell mounts NFS 3 and 4.x", opt)
				}
				o.version = major
				if ok {
					o.minor = minor
				}
			case key == "minorversion":
				o.minor = val
			case strings.ContainsAny(opt, " \t\n"):
				return o, fmt.Errorf("mount option %q holds a space", opt)
			default:
				o.data = append(o.data, opt)
			}
		}
	}
	if readOnly {
		o.flags |= unix.MS_RDONLY
	}
	o.flags |= unix.MS_NODEV
	return o, nil
}

// versions are the versions to try, best first: the one the options
// name, else 4.2, 4.1, 4.0 and 3, as mount.nfs negotiates.
func (o options) versions() []string {
	switch {
	case o.version == "3":
		return []string{"3"}
	case o.version == "4" && o.minor != "":
		return []string{"4." + o.minor}
	case o.version == "4":
		return []string{"4.2", "4.1", "4.0"}
	}
	return []string{"4.2", "4.1", "4.0", "3"}
}

// kernel mounts s with the kernel's client, trying each version until
// one is supported. ENODEV: the kernel has no NFS client.
func (m *Mounter) kernel(ctx context.Context, addr netip.Addr, s Share, o options, target string) error {
	mount := m.KernelMount
	if mount == nil {
		mount = unix.Mount
	}
	host := s.Server
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && a.Is6() {
		host = "[" + a.String() + "]"
	}
	source := host + ":" + s.Path
	var err error
	for _, v := range o.versions() {
		fstype := "nfs4"
		data := append([]string{"vers=" + v, "addr=" + addr.String()}, o.data...)
		if v == "3" {
			fstype = "nfs"
		} else if local, lerr := localAddr(addr); lerr == nil {
			// NFS 4's callbacks come to clientaddr, which mount.nfs
			// finds this way.
			data = append(data, "clientaddr="+local.String())
		}
		err = mountWithin(ctx, func() error { return mount(source, target, fstype, o.flags, strings.Join(data, ",")) })
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENODEV) && fstype == "nfs4" {
			// Not this version (or no NFS 4 in the kernel): the next.
			continue
		}
		break
	}
	return err
}

// mountWithin runs mount until it returns or ctx ends: a mount of a
// server that does not answer can take minutes, and cannot be
// interrupted; it finishes on its own.
func mountWithin(ctx context.Context, mount func() error) error {
	done := make(chan error, 1)
	go func() { done <- mount() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// localAddr is the address this namespace reaches addr from (no packet
// is sent: a UDP socket is only connected).
func localAddr(addr netip.Addr) (netip.Addr, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 2049)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
