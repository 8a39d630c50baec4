package nfsfuse

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	base := Options{Server: "10.0.0.5", Export: "/srv/share", Target: "/mnt/x"}
	tests := []struct {
		name    string
		edit    func(*Options)
		check   func(settings) bool
		wantErr string
	}{
		{"defaults", nil, func(s settings) bool {
			return !s.readOnly && !s.soft && s.timeo == 60*time.Second && s.retrans == 2 &&
				s.attrTimeout == time.Second && s.resvport && s.nfsPort == 0 && s.mountPort == 0
		}, ""},
		{"ports from options", func(o *Options) { o.Options = []string{"port=2050", "mountport=20048"} },
			func(s settings) bool { return s.nfsPort == 2050 && s.mountPort == 20048 }, ""},
		{"fields win over options", func(o *Options) { o.NFSPort = 1; o.Options = []string{"port=2050"} },
			func(s settings) bool { return s.nfsPort == 1 }, ""},
		{"ro then rw, comma-separated", func(o *Options) { o.Options = []string{"ro,rw"} },
			func(s settings) bool { return !s.readOnly }, ""},
		{"ro", func(o *Options) { o.Options = []string{"ro"} }, func(s settings) bool { return s.readOnly }, ""},
		{"version 3 over TCP", func(o *Options) { o.Options = []string{"nfsvers=3", "vers=3", "proto=tcp", "mountvers=3", "sec=sys"} },
			func(settings) bool { return true }, ""},
		{"soft, timeo, retrans", func(o *Options) { o.Options = []string{"soft", "timeo=15", "retrans=5"} },
			func(s settings) bool { return s.soft && s.timeo == 1500*time.Millisecond && s.retrans == 5 }, ""},
		{"actimeo", func(o *Options) { o.Options = []string{"actimeo=7"} },
			func(s settings) bool { return s.attrTimeout == 7*time.Second }, ""},
		{"noac", func(o *Options) { o.Options = []string{"noac"} }, func(s settings) bool { return s.attrTimeout == 0 }, ""},
		{"rsize, wsize", func(o *Options) { o.Options = []string{"rsize=65536", "wsize=32768"} },
			func(s settings) bool { return s.rsize == 65536 && s.wsize == 32768 }, ""},
		{"noresvport", func(o *Options) { o.Options = []string{"noresvport"} }, func(s settings) bool { return !s.resvport }, ""},
		{"noexec", func(o *Options) { o.Options = []string{"noexec"} }, func(s settings) bool { return s.noexec }, ""},
		{"harmless ones", func(o *Options) {
			o.Options = []string{"hard", "nolock", "noatime", "intr", "acregmin=3", "nocto", "async", "_netdev"}
		}, func(s settings) bool { return !s.soft }, ""},
		{"NFSv4", func(o *Options) { o.Options = []string{"vers=4.1"} }, nil, `mount option "vers=4.1": needs the kernel's NFS client`},
		{"UDP", func(o *Options) { o.Options = []string{"proto=udp"} }, nil, `mount option "proto=udp": needs the kernel's NFS client`},
		{"Kerberos", func(o *Options) { o.Options = []string{"sec=krb5p"} }, nil, `"sec=krb5p": needs the kernel's NFS client`},
		{"NLM locks", func(o *Options) { o.Options = []string{"lock"} }, nil, `"lock": needs the kernel's NFS client`},
		{"suid", func(o *Options) { o.Options = []string{"suid"} }, nil, `mount option "suid": the FUSE NFS client mounts nosuid,nodev`},
		{"unknown", func(o *Options) { o.Options = []string{"frobnicate"} }, nil, `mount option "frobnicate": unknown to the FUSE NFS client`},
		{"a bad number", func(o *Options) { o.Options = []string{"port=x"} }, nil, `mount option "port=x": want port=<number>`},
		{"a port out of range", func(o *Options) { o.NFSPort = 70000 }, nil, "port 70000 out of range"},
		{"a name, not an address", func(o *Options) { o.Server = "nfs.example.com" }, nil, `server "nfs.example.com" is not an IP address`},
		{"a relative export", func(o *Options) { o.Export = "share" }, nil, `export "share" is not an absolute path`},
		{"an IPv6 server", func(o *Options) { o.Server = "fd00::5" }, func(settings) bool { return true }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			if tt.edit != nil {
				tt.edit(&o)
			}
			s, err := o.resolve()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("resolve: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if !tt.check(s) {
				t.Errorf("settings %+v", s)
			}
		})
	}
	err := Options{Server: "10.0.0.5", Export: "/e", Target: "/t", Options: []string{"nfsvers=4"}}.Validate()
	if !errors.Is(err, ErrNeedsKernel) {
		t.Errorf("nfsvers=4: %v, want ErrNeedsKernel", err)
	}
}

// TestArgs: the child parses what Start passes back into the same Options.
func TestArgs(t *testing.T) {
	o := Options{Server: "10.0.0.5", Export: "/srv/share", Target: "/mnt/x", ReadOnly: true,
		NFSPort: 2049, MountPort: 20048, Options: []string{"soft", "timeo=10,retrans=1"}}
	want, err := o.resolve()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseFlags(o.args())
	if err != nil {
		t.Fatal(err)
	}
	gs, err := got.resolve()
	if err != nil || gs != want {
		t.Errorf("through the flags: %+v, %v; want %+v", gs, err, want)
	}
}

// fakePortmapper answers GETPORT from ports (by program number).
func fakePortmapper(t *testing.T, ports map[uint32]uint32) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					rec, err := readRecord(r)
					if err != nil {
						return
					}
					d := dec{b: rec}
					xid := d.u32()
					for range 5 { // call, rpcvers, prog, vers, proc
						d.u32()
					}
					d.u32()
					d.opaque(400) // cred
					d.u32()
					d.opaque(400) // verf
					prog := d.u32()
					var e enc
					e.u32(0)
					e.u32(xid)
					e.u32(rpcReply)
					e.u32(msgAccepted)
					e.u32(authNone)
					e.opaque(nil)
					e.u32(0)
					e.u32(ports[prog])
					e.b[0] = 0x80
					e.b[3] = byte(len(e.b) - 4)
					if _, err := c.Write(e.b); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestAskPortmapper(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s, err := Options{Server: "127.0.0.1", Export: "/e", Target: "/t"}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		port     func(t *testing.T) string
		nfs, mnt int
		wantErr  string
	}{
		{"it answers", func(t *testing.T) string {
			return fakePortmapper(t, map[uint32]uint32{progNFS: 2049, progMount: 20048})
		}, 2049, 20048, ""},
		{"none answers: 2049 for both", func(t *testing.T) string { return strconv.Itoa(closedPort(t)) }, 2049, 2049, ""},
		{"it knows no MOUNT", func(t *testing.T) string {
			return fakePortmapper(t, map[uint32]uint32{progNFS: 2049})
		}, 0, 0, "the server's portmapper knows no MOUNT v3 over TCP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := portmapperPort
			portmapperPort = tt.port(t)
			defer func() { portmapperPort = old }()
			nfs, mnt, err := askPortmapper(t.Context(), s, log)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("askPortmapper: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || nfs != tt.nfs || mnt != tt.mnt {
				t.Errorf("askPortmapper = %d, %d, %v; want %d, %d", nfs, mnt, err, tt.nfs, tt.mnt)
			}
		})
	}
}

func TestSource(t *testing.T) {
	for _, tt := range []struct{ server, want string }{
		{"10.0.0.5", "10.0.0.5:/srv/share"},
		{"fd00::5", "[fd00::5]:/srv/share"},
	} {
		if got := source(tt.server, "/srv/share"); got != tt.want {
			t.Errorf("source(%q) = %q, want %q", tt.server, got, tt.want)
		}
	}
}
