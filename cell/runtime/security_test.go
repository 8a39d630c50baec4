package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// fakeRootfs is an image root file system with /etc/passwd and /etc/group.
func fakeRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nwww:x:33:33:www:/var/www:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n",
		"etc/group":  "root:x:0:\nwww:x:33:app\napp:x:1001:\nvideo:x:44:app,www\naudio:x:29:\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func specFor(t *testing.T, sec Security) *specs.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(t.Context(), "test")
	opts := append([]oci.SpecOpts{oci.WithRootFSPath(fakeRootfs(t))}, securityOpts(sec)...)
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, opts...)
	if err != nil {
		t.Fatalf("generating spec: %v", err)
	}
	return s
}

func TestSecurityOptsUser(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sec           Security
		uid, gid      uint32
		additionalGID []uint32
	}{
		{name: "numeric user in passwd gets its group and memberships", sec: Security{User: "1000"}, uid: 1000, gid: 1001, additionalGID: []uint32{33, 44, 1001}},
		{name: "numeric user not in passwd is group 0", sec: Security{User: "1234"}, uid: 1234, gid: 0, additionalGID: []uint32{0}},
		{name: "uid:gid", sec: Security{User: "1234:5678"}, uid: 1234, gid: 5678, additionalGID: []uint32{5678}},
		{name: "name", sec: Security{User: "www"}, uid: 33, gid: 33, additionalGID: []uint32{33, 44}},
		{name: "name:gid", sec: Security{User: "app:7"}, uid: 1000, gid: 7, additionalGID: []uint32{7, 33, 44}},
		{name: "supplemental groups merged", sec: Security{User: "1000", SupplementalGroups: []int64{5, 44}}, uid: 1000, gid: 1001, additionalGID: []uint32{5, 33, 44, 1001}},
		{name: "strict: no /etc/group memberships", sec: Security{User: "1000", StrictGroups: true, SupplementalGroups: []int64{5}}, uid: 1000, gid: 1001, additionalGID: []uint32{5, 1001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := specFor(t, tc.sec).Process.User
			if u.UID != tc.uid || u.GID != tc.gid {
				t.Errorf("uid:gid = %d:%d, want %d:%d", u.UID, u.GID, tc.uid, tc.gid)
			}
			if diff := cmp.Diff(tc.additionalGID, u.AdditionalGids); diff != "" {
				t.Errorf("additional gids (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecurityOptsUnknownName(t *testing.T) {
	ctx := namespaces.WithNamespace(t.Context(), "test")
	opts := append([]oci.SpecOpts{oci.WithRootFSPath(fakeRootfs(t))}, securityOpts(Security{User: "nobody"})...)
	if _, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "c"}, opts...); err == nil {
		t.Error("a user name the image does not have: no error")
	}
}

func TestSecurityOptsCapabilities(t *testing.T) {
	def := specFor(t, Security{}).Process.Capabilities.Bounding
	for _, tc := range []struct {
		name     string
		sec      Security
		has, not []string
	}{
		{name: "defaults", sec: Security{}, has: []string{"CAP_CHOWN", "CAP_NET_RAW"}, not: []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN"}},
		{name: "add", sec: Security{CapAdd: []string{"NET_ADMIN"}}, has: []string{"CAP_NET_ADMIN", "CAP_CHOWN"}},
		{name: "drop", sec: Security{CapDrop: []string{"chown"}}, has: []string{"CAP_KILL"}, not: []string{"CAP_CHOWN"}},
		{name: "drop ALL, add one", sec: Security{CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"}}, has: []string{"CAP_NET_BIND_SERVICE"}, not: []string{"CAP_CHOWN", "CAP_KILL"}},
		{name: "add ALL, drop one", sec: Security{CapAdd: []string{"ALL"}, CapDrop: []string{"CHOWN"}}, has: []string{"CAP_SYS_ADMIN", "CAP_KILL"}, not: []string{"CAP_CHOWN"}},
		{name: "privileged", sec: Security{Privileged: true, CapDrop: []string{"ALL"}}, has: []string{"CAP_SYS_ADMIN", "CAP_CHOWN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := specFor(t, tc.sec).Process.Capabilities
			for _, set := range [][]string{c.Bounding, c.Effective, c.Permitted} {
				for _, h := range tc.has {
					if !slices.Contains(set, h) {
						t.Errorf("%s missing from %v", h, set)
					}
				}
				for _, n := range tc.not {
					if slices.Contains(set, n) {
						t.Errorf("%s in %v", n, set)
					}
				}
			}
			if len(c.Ambient) > 0 {
				t.Errorf("ambient = %v, want none", c.Ambient)
			}
		})
	}
	if len(def) != 14 {
		t.Errorf("default capability set has %d capabilities, want containerd's 14: %v", len(def), def)
	}
}

func TestSecurityOptsPrivilegesAndPaths(t *testing.T) {
	def := specFor(t, Security{})
	if def.Process.NoNewPrivileges {
		t.Error("no_new_privs set by default; the CRI leaves it to allowPrivilegeEscalation")
	}
	if def.Root.Readonly || def.Linux.Seccomp != nil || len(def.Linux.MaskedPaths) == 0 {
		t.Errorf("defaults: readonly %v, seccomp %v, masked %v", def.Root.Readonly, def.Linux.Seccomp != nil, def.Linux.MaskedPaths)
	}
	s := specFor(t, Security{NoNewPrivs: true, ReadOnlyRootfs: true, Seccomp: SeccompRuntimeDefault,
		MaskedPaths: []string{"/proc/kcore"}, ReadonlyPaths: []string{"/proc/sys"}, Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}})
	if !s.Process.NoNewPrivileges || !s.Root.Readonly {
		t.Errorf("no_new_privs %v, readonly root %v, want both", s.Process.NoNewPrivileges, s.Root.Readonly)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Errorf("seccomp = %+v, want containerd's default profile", s.Linux.Seccomp)
	}
	if diff := cmp.Diff([]string{"/proc/kcore"}, s.Linux.MaskedPaths); diff != "" {
		t.Errorf("masked paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/proc/sys"}, s.Linux.ReadonlyPaths); diff != "" {
		t.Errorf("read-only paths (-want +got):\n%s", diff)
	}
	if s.Linux.Sysctl["net.ipv4.ip_unprivileged_port_start"] != "0" {
		t.Errorf("sysctls = %v", s.Linux.Sysctl)
	}
	p := specFor(t, Security{Privileged: true, Seccomp: SeccompRuntimeDefault})
	if p.Linux.Seccomp != nil || len(p.Linux.MaskedPaths) > 0 || len(p.Linux.ReadonlyPaths) > 0 {
		t.Errorf("privileged: seccomp %v, masked %v, read-only %v; want none", p.Linux.Seccomp != nil, p.Linux.MaskedPaths, p.Linux.ReadonlyPaths)
	}
	for _, m := range p.Mounts {
		if m.Destination == "/sys" && slices.Contains(m.Options, "ro") {
			t.Errorf("privileged: /sys mounted %v, want writable", m.Options)
		}
	}
	if len(p.Linux.Devices) == 0 {
		t.Error("privileged: no host devices")
	}
}
