package images_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/kipcell/kip/test/containerdtest"
	"github.com/kipcell/kip/test/images"
	"github.com/kipcell/kip/test/registry"
)

// needContainerd skips unless the test can run a real containerd with runc.
func needContainerd(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not starting containerd")
	}
	containerdtest.Require(t)
	needBusybox(t)
}

// TestContainerdRunsImages proves the images really run: a real containerd
// pulls them from the loopback registry over plain HTTP, with basic auth,
// and runs them with runc.
func TestContainerdRunsImages(t *testing.T) {
	needContainerd(t)
	d := containerdtest.StartDaemon(t)
	c := d.Client

	reg := startRegistry(t, registry.Options{Username: "kip", Password: "pull-secret"})
	set, err := images.PushAll(t.Context(), reg)
	if err != nil {
		t.Fatalf("PushAll: %v", err)
	}

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	ns := "kip-images-test-" + hex.EncodeToString(suffix)
	ctx := namespaces.WithNamespace(t.Context(), ns)
	// Cleanups run last-in first-out: containers, then images, then the
	// namespace and its cgroup parents.
	t.Cleanup(func() { containerdtest.CleanupNamespace(t, c, ns) })

	authz := docker.NewDockerAuthorizer(docker.WithAuthCreds(func(host string) (string, string, error) {
		if host != reg.Host() {
			return "", "", fmt.Errorf("credentials asked for %q, want %q", host, reg.Host())
		}
		u, p := reg.Credentials()
		return u, p, nil
	}))
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(
		docker.WithPlainHTTP(docker.MatchLocalhost), docker.WithAuthorizer(authz))})

	// run starts the image and returns its task, its exit channel, and its
	// output so far (stdout and stderr together).
	run := func(t *testing.T, ref, id string, opts ...oci.SpecOpts) (containerd.Task, <-chan containerd.ExitStatus, func() string) {
		t.Helper()
		ctr := d.RunImage(ctx, t, resolver, ref, id, opts...)
		return ctr.Task, ctr.Exit, ctr.Output.String
	}

	t.Run("hello", func(t *testing.T) {
		_, exitCh, logs := run(t, set.Hello.Ref, "hello",
			oci.WithHostname("kipcell"), oci.WithEnv([]string{"MESSAGE=it runs"}))
		want := "hello from kipcell: it runs"
		deadline := time.Now().Add(20 * time.Second)
		for {
			b := logs()
			if strings.Contains(b, want) {
				break
			}
			select {
			case st := <-exitCh:
				t.Fatalf("hello exited (%d, %v); log:\n%s", st.ExitCode(), st.Error(), b)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q after 20s; log:\n%s", want, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("crash", func(t *testing.T) {
		task, exitCh, logs := run(t, set.Crash.Ref, "crash", oci.WithEnv([]string{"EXIT_CODE=3"}))
		select {
		case st := <-exitCh:
			if st.ExitCode() != 3 {
				t.Errorf("crash exited %d (%v), want 3", st.ExitCode(), st.Error())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("crash did not exit in 20s")
		}
		task.IO().Wait() // both streams copied to the end
		if b := logs(); !strings.Contains(b, "crash: stdout") || !strings.Contains(b, "crash: stderr") {
			t.Errorf("output = %q, want both lines", b)
		}
	})

	t.Run("iptables", func(t *testing.T) {
		ipt, err := images.PushIPTables(t.Context(), reg)
		if err != nil {
			t.Fatalf("PushIPTables: %v", err)
		}
		task, exitCh, logs := run(t, ipt.Ref, "iptables", oci.WithProcessArgs("iptables", "-V"))
		select {
		case st := <-exitCh:
			if st.ExitCode() != 0 {
				task.IO().Wait()
				t.Fatalf("iptables -V exited %d; output:\n%s", st.ExitCode(), logs())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("iptables -V did not exit in 20s")
		}
		task.IO().Wait()
		if !strings.HasPrefix(logs(), "iptables v") {
			t.Errorf("iptables -V: %q, want its version", logs())
		}
	})

	t.Run("busybox", func(t *testing.T) {
		task, exitCh, logs := run(t, set.Busybox.Ref, "busybox",
			oci.WithProcessArgs("sh", "-c", "echo $(id -u):$(hostname) && ls /bin/wget && seq 3 | awk '{s+=$1} END {print s}'"),
			oci.WithHostname("bb"))
		select {
		case st := <-exitCh:
			if st.ExitCode() != 0 {
				task.IO().Wait()
				t.Fatalf("sh exited %d; output:\n%s", st.ExitCode(), logs())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("sh did not exit in 20s")
		}
		task.IO().Wait()
		if want := "0:bb\n/bin/wget\n6\n"; logs() != want {
			t.Errorf("output = %q, want %q", logs(), want)
		}
	})
}
