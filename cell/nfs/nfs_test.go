package nfs

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mountCall is one mount(2) the Mounter made.
type mountCall struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// fakeKernel answers mount(2) per fstype and version: errs["nfs4 4.2"],
// errs["nfs 3"]; nil when absent.
func fakeKernel(calls *[]mountCall, errs map[string]error) func(source, target, fstype string, flags uintptr, data string) error {
	return func(source, target, fstype string, flags uintptr, data string) error {
		*calls = append(*calls, mountCall{source, target, fstype, flags, data})
		vers := strings.TrimPrefix(strings.Split(data, ",")[0], "vers=")
		return errs[fstype+" "+vers]
	}
}

func mounter(calls *[]mountCall, errs map[string]error, fuse *[]string) *Mounter {
	return &Mounter{
		KernelMount: fakeKernel(calls, errs),
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "nfs.example.com":
				return []netip.Addr{netip.MustParseAddr("fd00::7"), netip.MustParseAddr("10.0.0.7")}, nil
			case "metadata.google.internal":
				return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
			case "sneaky.example.com":
				return []netip.Addr{netip.MustParseAddr("10.0.0.8"), netip.MustParseAddr("127.0.0.1")}, nil
			case "self.example.com":
				return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil
			}
			return nil, errors.New("no such host")
		},
		OwnAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.0.0.2")}, nil },
		FUSE: func(_ context.Context, addr netip.Addr, s Share, target string) error {
			*fuse = append(*fuse, addr.String()+" "+s.String()+" "+target)
			return nil
		},
	}
}

// TestMountKernel: what mount(2) gets — the server's address in addr=,
// versions tried as mount.nfs negotiates, generic options as flags,
// nodev always.
func TestMountKernel(t *testing.T) {
	noV42 := map[string]error{"nfs4 4.2": unix.EPROTONOSUPPORT}
	tests := []struct {
		name      string
		share     Share
		errs      map[string]error
		wantCalls []mountCall // data's clientaddr= is left out
		wantErr   string
	}{
		{
			name:  "negotiated down to 4.1",
			share: Share{Server: "10.0.0.5", Path: "/srv"},
			errs:  noV42,
			wantCalls: []mountCall{
				{"10.0.0.5:/srv", "/t", "nfs4", unix.MS_NODEV, "vers=4.2,addr=10.0.0.5"},
				{"10.0.0.5:/srv", "/t", "nfs4", unix.MS_NODEV, "vers=4.1,addr=10.0.0.5"},
			},
		},
		{
			name:  "no NFS 4 at all: 3",
			share: Share{Server: "nfs.example.com", Path: "/srv", ReadOnly: true, Options: []string{"noatime,hard", "timeo=600"}},
			errs:  map[string]error{"nfs4 4.2": unix.EPROTONOSUPPORT, "nfs4 4.1": unix.EPROTONOSUPPORT, "nfs4 4.0": unix.EPROTONOSUPPORT},
			wantCalls: []mountCall{
				{"nfs.example.com:/srv", "/t", "nfs4", unix.MS_NODEV | unix.MS_RDONLY | unix.MS_NOATIME, "vers=4.2,addr=10.0.0.7,hard,timeo=600"},
				{"nfs.example.com:/srv", "/t", "nfs4", unix.MS_NODEV | unix.MS_RDONLY | unix.MS_NOATIME, "vers=4.1,addr=10.0.0.7,hard,timeo=600"},
				{"nfs.example.com:/srv", "/t", "nfs4", unix.MS_NODEV | unix.MS_RDONLY | unix.MS_NOATIME, "vers=4.0,addr=10.0.0.7,hard,timeo=600"},
				{"nfs.example.com:/srv", "/t", "nfs", unix.MS_NODEV | unix.MS_RDONLY | unix.MS_NOATIME, "vers=3,addr=10.0.0.7,hard,timeo=600"},
			},
		},
		{
			name:      "the version the options name, only",
			share:     Share{Server: "10.0.0.5", Path: "/srv", Options: []string{"nfsvers=3", "port=2049", "dev", "suid"}},
			wantCalls: []mountCall{{"10.0.0.5:/srv", "/t", "nfs", unix.MS_NODEV, "vers=3,addr=10.0.0.5,port=2049"}},
		},
		{
			name:      "vers=4 with a minorversion",
			share:     Share{Server: "10.0.0.5", Path: "/srv", Options: []string{"vers=4", "minorversion=1", "rw"}},
			wantCalls: []mountCall{{"10.0.0.5:/srv", "/t", "nfs4", unix.MS_NODEV, "vers=4.1,addr=10.0.0.5"}},
		},
		{
			name:      "an IPv6 server in brackets",
			share:     Share{Server: "fd00::9", Path: "/srv", Options: []string{"vers=4.1"}},
			wantCalls: []mountCall{{"[fd00::9]:/srv", "/t", "nfs4", unix.MS_NODEV, "vers=4.1,addr=fd00::9"}},
		},
		{
			name:      "the server's refusal is the error",
			share:     Share{Server: "10.0.0.5", Path: "/nope", Options: []string{"vers=3"}},
			errs:      map[string]error{"nfs 3": unix.EACCES},
			wantCalls: []mountCall{{"10.0.0.5:/nope", "/t", "nfs", unix.MS_NODEV, "vers=3,addr=10.0.0.5"}},
			wantErr:   "mounting 10.0.0.5:/nope: permission denied",
		},
		{name: "vers=2 refused", share: Share{Server: "10.0.0.5", Path: "/srv", Options: []string{"vers=2"}}, wantErr: "mount option vers=2: a cell mounts NFS 3 and 4.x"},
		{name: "a relative path refused", share: Share{Server: "10.0.0.5", Path: "srv"}, wantErr: "needs a server and an absolute path"},
		{name: "the metadata by name refused", share: Share{Server: "metadata.google.internal", Path: "/"},
			wantErr: "server refused: metadata.google.internal resolves to 169.254.169.254, and it is a link-local address"},
		{name: "one loopback address among others refused", share: Share{Server: "sneaky.example.com", Path: "/"},
			wantErr: "sneaky.example.com resolves to 127.0.0.1, and it is a loopback address"},
		{name: "the instance's own address refused", share: Share{Server: "self.example.com", Path: "/"},
			wantErr: "self.example.com resolves to 10.0.0.2, and it is the instance's own address"},
		{name: "Azure's WireServer refused", share: Share{Server: "168.63.129.16", Path: "/"}, wantErr: "it is Azure's WireServer"},
		{name: "a name that does not resolve", share: Share{Server: "nowhere.example.com", Path: "/"}, wantErr: "resolving nowhere.example.com: no such host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []mountCall
			var fuse []string
			err := mounter(&calls, tt.errs, &fuse).Mount(t.Context(), tt.share, "/t")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Mount = %v, want an error with %q", err, tt.wantErr)
			}
			for i := range calls {
				calls[i].data = withoutClientAddr(calls[i].data)
			}
			if !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("mount(2) calls:\n got %+v\nwant %+v", calls, tt.wantCalls)
			}
			if len(fuse) > 0 {
				t.Errorf("the agent's client mounted %v; the kernel's should have", fuse)
			}
		})
	}
}

func withoutClientAddr(data string) string {
	var kept []string
	for o := range strings.SplitSeq(data, ",") {
		if !strings.HasPrefix(o, "clientaddr=") {
			kept = append(kept, o)
		}
	}
	return strings.Join(kept, ",")
}

// TestMountFallsBackOnFUSE: a kernel without an NFS client (ENODEV) gets
// the agent's own NFSv3 client, but for a share that asks for NFS 4.
func TestMountFallsBackOnFUSE(t *testing.T) {
	noNFS := map[string]error{"nfs4 4.2": unix.ENODEV, "nfs4 4.1": unix.ENODEV, "nfs4 4.0": unix.ENODEV, "nfs 3": unix.ENODEV}
	var calls []mountCall
	var fuse []string
	m := mounter(&calls, noNFS, &fuse)
	if err := m.Mount(t.Context(), Share{Server: "nfs.example.com", Path: "/srv"}, "/t"); err != nil {
		t.Fatalf("Mount: %v", err)
	}
	if want := []string{"10.0.0.7 nfs.example.com:/srv /t"}; !slices.Equal(fuse, want) {
		t.Errorf("the agent's client mounted %v, want %v", fuse, want)
	}

	fuse = nil
	err := m.Mount(t.Context(), Share{Server: "10.0.0.5", Path: "/srv", Options: []string{"nfsvers=4.1"}}, "/t")
	if err == nil || !strings.Contains(err.Error(), "NFS 4.1 needs the kernel's NFS client, and this cell's kernel has none") || len(fuse) > 0 {
		t.Errorf("Mount of an NFS 4.1 share without a kernel client = %v (agent's client: %v), want it refused", err, fuse)
	}

	m.FUSE = nil
	if err := m.Mount(t.Context(), Share{Server: "10.0.0.5", Path: "/srv"}, "/t"); err == nil || !strings.Contains(err.Error(), "the cell's kernel has no NFS client") {
		t.Errorf("Mount without a kernel client or a fallback = %v", err)
	}
}

// TestMountGivesUpWithItsContext: a mount(2) that does not return (a
// server that does not answer) ends with the caller's context.
func TestMountGivesUpWithItsContext(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	m := &Mounter{
		KernelMount: func(string, string, string, uintptr, string) error { <-block; return nil },
		OwnAddrs:    func() ([]netip.Addr, error) { return nil, nil },
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Mount(ctx, Share{Server: "10.0.0.5", Path: "/srv"}, "/t"); !errors.Is(err, context.Canceled) {
		t.Errorf("Mount = %v, want the context's error", err)
	}
}
