package nfsfuse

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options says what to mount where. It is this package's whole contract
// with its caller (cell/nfs), which resolves and checks the server first.
type Options struct {
	// Server is the server's IP address, already resolved and checked by
	// the caller: this package dials it as given.
	Server string

	// Export is the exported path, "/srv/share".
	Export string

	// Target is the directory to mount on; it must exist.
	Target string

	// ReadOnly mounts read-only (MS_RDONLY): every write is EROFS.
	ReadOnly bool

	// NFSPort and MountPort are the TCP ports of the NFS and MOUNT
	// programs. 0 asks the server's portmapper (port 111: GETPORT for
	// MOUNT v3 and NFS v3 over TCP); where no portmapper answers, 2049
	// for both, which is what go-nfs and many userspace servers serve
	// (one port, no portmapper). The port= and mountport= mount options
	// set them too; a field that is not 0 wins.
	NFSPort, MountPort int

	// Options are a PersistentVolume's mountOptions, each one option or
	// several comma-separated. Honoured: ro, rw; nfsvers=3, vers=3,
	// mountvers=3, proto=tcp, mountproto=tcp, sec=sys; port=N,
	// mountport=N; hard (the default), soft, timeo=N (tenths of a second,
	// default 600), retrans=N (default 2); actimeo=N (seconds, default 1),
	// noac; rsize=N, wsize=N; resvport (the default), noresvport; noexec,
	// exec, nosuid, nodev.
	//
	// Accepted and ignored, since they change nothing a pod can observe
	// through this client or ask for what it does anyway: nolock (locks
	// are local to the cell), intr, nointr, noatime, nodiratime, relatime,
	// strictatime, atime, diratime (the server keeps access times),
	// acregmin, acregmax, acdirmin, acdirmax (actimeo alone sets the cache
	// time), cto, nocto (the page cache is dropped on every open), sync,
	// async (writes are FILE_SYNC), lookupcache, fg, bg, retry, _netdev,
	// nofail, defaults, auto, noauto, user, nouser.
	//
	// Refused, with an error naming the option, since the pod would not
	// get what it asks for: what only the kernel's client does
	// (ErrNeedsKernel: NFSv4, UDP, Kerberos, NLM locks with lock, fsc,
	// nconnect, ...), suid and dev (a FUSE mount is nosuid,nodev), and any
	// option unknown here.
	Options []string

	// LogFile is where the mount's process writes its log (appended);
	// empty discards it.
	LogFile string
}

// settings are Options with the mount options applied and defaults filled.
type settings struct {
	server, export, target string
	readOnly               bool
	nfsPort, mountPort     int
	soft                   bool
	timeo                  time.Duration
	retrans                int
	attrTimeout            time.Duration
	rsize, wsize           uint32
	resvport               bool
	noexec                 bool
}

// kernelOnly are options only the kernel's client can honour.
var kernelOnly = []string{"nfsvers", "vers", "minorversion", "proto", "mountproto", "mountvers", "sec", "fsc", "local_lock", "lock", "nconnect", "xprtsec", "max_connect", "trunkdiscovery", "rdirplus", "nordirplus", "posix", "acl", "noacl"}

var ignored = map[string]bool{
	"nolock": true, "intr": true, "nointr": true,
	"noatime": true, "nodiratime": true, "relatime": true, "strictatime": true, "atime": true, "diratime": true,
	"acregmin": true, "acregmax": true, "acdirmin": true, "acdirmax": true,
	"cto": true, "nocto": true, "sync": true, "async": true,
	"lookupcache": true, "fg": true, "bg": true, "retry": true, "_netdev": true, "nofail": true,
	"defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true,
}

// Validate checks o as Start does before it starts anything: the server
// is an IP address, the paths are absolute, every mount option is one
// this client honours or ignores.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve checks o and applies its mount options.
func (o Options) resolve() (settings, error) {
	s := settings{
		server: o.Server, export: o.Export, target: o.Target, readOnly: o.ReadOnly,
		timeo:       60 * time.Second, // Linux's default for TCP: timeo=600
		retrans:     2,
		attrTimeout: time.Second,
		rsize:       1 << 20,
		wsize:       1 << 20,
		resvport:    true,
	}
	if _, err := netip.ParseAddr(o.Server); err != nil {
		return s, fmt.Errorf("server %q is not an IP address", o.Server)
	}
	if !path.IsAbs(o.Export) {
		return s, fmt.Errorf("export %q is not an absolute path", o.Export)
	}
	if !path.IsAbs(o.Target) {
		return s, fmt.Errorf("target %q is not an absolute path", o.Target)
	}
	for _, opt := range o.Options {
		for _, one := range strings.Split(opt, ",") {
			if err := s.apply(strings.TrimSpace(one)); err != nil {
				return s, err
			}
		}
	}
	if o.NFSPort != 0 {
		s.nfsPort = o.NFSPort
	}
	if o.MountPort != 0 {
		s.mountPort = o.MountPort
	}
	for _, p := range []int{s.nfsPort, s.mountPort} {
		if p < 0 || p > 65535 {
			return s, fmt.Errorf("port %d out of range", p)
		}
	}
	return s, nil
}

func (s *settings) apply(opt string) error {
	if opt == "" {
		return nil
	}
	name, val, hasVal := strings.Cut(opt, "=")
	num := func() (int, error) {
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 0 {
			return 0, fmt.Errorf("mount option %q: want %s=<number>", opt, name)
		}
		return n, nil
	}
	switch name {
	case "ro":
		s.readOnly = true
	case "rw":
		s.readOnly = false
	case "hard":
		s.soft = false
	case "soft":
		s.soft = true
	case "noac":
		s.attrTimeout = 0
	case "resvport":
		s.resvport = true
	case "noresvport":
		s.resvport = false
	case "noexec":
		s.noexec = true
	case "exec", "nosuid", "nodev":
		// exec is the default; FUSE mounts are always nosuid and nodev.
	case "suid", "dev":
		return fmt.Errorf("mount option %q: the FUSE NFS client mounts nosuid,nodev; %s needs the kernel's NFS client", opt, opt)
	case "port", "mountport", "timeo", "retrans", "actimeo", "rsize", "wsize":
		n, err := num()
		if err != nil {
			return err
		}
		return s.applyNumber(opt, name, n)
	case "nfsvers", "vers", "mountvers", "proto", "mountproto", "sec":
		if want := map[string]string{"nfsvers": "3", "vers": "3", "mountvers": "3", "proto": "tcp", "mountproto": "tcp", "sec": "sys"}[name]; val == want {
			return nil
		}
		return kernelNeeded(opt)
	default:
		if ignored[name] {
			return nil
		}
		if slices.Contains(kernelOnly, name) {
			return kernelNeeded(opt)
		}
		return fmt.Errorf("mount option %q: unknown to the FUSE NFS client", opt)
	}
	return nil
}

// applyNumber applies a numeric option, n its value.
func (s *settings) applyNumber(opt, name string, n int) error {
	switch name {
	case "port":
		s.nfsPort = n
	case "mountport":
		s.mountPort = n
	case "timeo":
		if n == 0 {
			return fmt.Errorf("mount option %q: want timeo above 0", opt)
		}
		s.timeo = time.Duration(n) * time.Second / 10
	case "retrans":
		s.retrans = n
	case "actimeo":
		s.attrTimeout = time.Duration(n) * time.Second
	case "rsize":
		s.rsize = uint32(max(n, 4096))
	case "wsize":
		s.wsize = uint32(max(n, 4096))
	}
	return nil
}

// ErrNeedsKernel is wrapped by the error of a mount option only the
// kernel's NFS client can honour (NFSv4, UDP, Kerberos, NLM locks...).
var ErrNeedsKernel = errors.New("needs the kernel's NFS client")

func kernelNeeded(opt string) error {
	return fmt.Errorf("mount option %q: %w", opt, ErrNeedsKernel)
}

// args are the child's command-line flags for s's Options.
func (o Options) args() []string {
	a := []string{"-server", o.Server, "-export", o.Export, "-target", o.Target}
	if o.ReadOnly {
		a = append(a, "-ro")
	}
	if o.NFSPort != 0 {
		a = append(a, "-port", strconv.Itoa(o.NFSPort))
	}
	if o.MountPort != 0 {
		a = append(a, "-mountport", strconv.Itoa(o.MountPort))
	}
	if len(o.Options) > 0 {
		a = append(a, "-o", strings.Join(o.Options, ","))
	}
	return a
}
