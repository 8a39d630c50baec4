package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// The machine's mount namespace (Config.MountNamespace).
//
// A cell's agent must live in the mount namespace of the containerd it
// drives: containerd's runc binds the tmpfs of a pod's secrets and pins
// the pod's network namespace on paths the agent mounts, and sees them
// only in its own namespace. When kip runs in a pod (the local overlay of
// deploy/kustomize), the plugin is in its container's mount namespace,
// not the node's; and kip's image has no ip, iptables or nsenter, which
// the node has. So the plugin can be told a mount namespace, the node's
// (/proc/1/ns/mnt with the pod's hostPID), in which it runs its commands
// (ip, nsenter and, through nsenter, the agent) and looks up what they
// made there (/var/run/netns, the mounts below a cell's directory).
//
// A process's threads share one mount namespace with their filesystem
// attributes (CLONE_FS), which setns refuses to leave; one OS thread that
// first takes its own attributes (unshare CLONE_FS) may join another
// namespace alone. That thread, locked to one goroutine for the plugin's
// life, runs what must happen there; a child it forks starts in its
// namespace. It is never returned to the Go scheduler, and is never the
// process's main thread (serve).

// machinePath is the PATH of what the plugin runs in another mount
// namespace: its own PATH (kip's image's) leaves out the sbin directories,
// where a node keeps ip and iptables.
const machinePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// machine is where the plugin's commands run: in ns, or in the plugin's
// own mount namespace when ns is nil.
type machine struct {
	ns *mountNamespace
}

// mountNamespace runs functions on a thread that has joined a mount
// namespace.
type mountNamespace struct {
	path string
	do   chan func()
}

// enterMountNamespace starts the thread and has it join the mount
// namespace at path (a /proc/<pid>/ns/mnt or a file bound to one).
func enterMountNamespace(path string) (*mountNamespace, error) {
	m := &mountNamespace{path: path, do: make(chan func())}
	errc := make(chan error, 1)
	go m.serve(errc)
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("entering mount namespace %s: %w", path, err)
	}
	return m, nil
}

// serve locks the goroutine to its thread, joins m's namespace and runs
// what m.do brings, for ever. Not on the process's main thread: /proc/self
// is the main thread's view for every thread, so the process would seem
// to be in m's namespace. There, it hands over to another goroutine,
// which cannot get the main thread while this one holds it.
func (m *mountNamespace) serve(errc chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		handed := make(chan error, 1)
		go m.serve(handed)
		err := <-handed
		runtime.UnlockOSThread()
		errc <- err
		return
	}
	// Never unlocked from here: the thread ends with the plugin, or with
	// this goroutine if it could not join, so that no goroutine ever runs
	// on a thread with other filesystem attributes than its process.
	if err := join(m.path); err != nil {
		errc <- err
		return
	}
	errc <- nil
	for f := range m.do {
		f()
	}
}

// join makes the calling (locked) thread's filesystem attributes its own
// and joins the mount namespace at path.
func join(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unsharing the thread's filesystem attributes: %w", err)
	}
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("joining: %w", err)
	}
	return nil
}

// run runs f where m's commands run, and returns when f has.
func (m machine) run(f func()) {
	if m.ns == nil {
		f()
		return
	}
	done := make(chan struct{})
	m.ns.do <- func() {
		defer close(done)
		f()
	}
	<-done
}

// start finds the executable name where m's commands run, starts the
// command build makes of its path there, and returns it; the child starts
// in that namespace, with machinePath as its PATH when it is another. The
// caller waits for it.
func (m machine) start(name string, build func(path string) *exec.Cmd) (cmd *exec.Cmd, err error) {
	m.run(func() {
		var path string
		if path, err = m.resolve(name); err != nil {
			return
		}
		cmd = build(path)
		if m.ns != nil {
			cmd.Env = withPath(cmd.Environ(), machinePath)
		}
		err = cmd.Start()
	})
	return cmd, err
}

// withPath returns env with PATH set to path.
func withPath(env []string, path string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+path)
}

// output runs name with args where m's commands run and returns its
// combined output; errors carry the output.
func (m machine) output(ctx context.Context, name string, args ...string) (string, error) {
	var out strings.Builder
	cmd, err := m.start(name, func(path string) *exec.Cmd {
		c := exec.CommandContext(ctx, path, args...)
		c.Stdout, c.Stderr = &out, &out
		return c
	})
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// lookPath is exec.LookPath where m's commands run, in machinePath when
// that is another mount namespace.
func (m machine) lookPath(name string) (path string, err error) {
	m.run(func() { path, err = m.resolve(name) })
	return path, err
}

// resolve is lookPath on the thread where m's commands run.
func (m machine) resolve(name string) (string, error) {
	if m.ns == nil {
		return exec.LookPath(name)
	}
	return lookPathIn(machinePath, name)
}

// lookPathIn finds the executable name in the directories of path, as
// exec.LookPath does in $PATH.
func lookPathIn(path, name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in %s: %w", name, path, exec.ErrNotFound)
}

// exists reports whether path exists where m's commands run.
func (m machine) exists(path string) bool {
	var err error
	m.run(func() { _, err = os.Stat(path) })
	return !errors.Is(err, os.ErrNotExist)
}

// sameFile reports whether path is the same file in the plugin's mount
// namespace and where m's commands run.
func (m machine) sameFile(path string) (bool, error) {
	here, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	var there os.FileInfo
	m.run(func() { there, err = os.Stat(path) })
	if err != nil {
		return false, err
	}
	return os.SameFile(here, there), nil
}
