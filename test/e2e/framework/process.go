package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/cell/pod"
)

// start runs `kip run` with the configuration file, its output to
// logFile, which it closes when kip exits (then k.done closes).
func (k *Kip) start(logFile *os.File) error {
	k.cmd = exec.Command(filepath.Join(k.BinDir, "kip"), "run", "--config", k.ConfigPath)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	k.cmd.Env = append(append(append(os.Environ(), "KUBECONFIG="), raceEnv(k.NodeName)...), k.env...)
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := k.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting kip: %w", err)
	}
	done := k.done
	go func() { _ = k.cmd.Wait(); _ = logFile.Close(); close(done) }()
	return nil
}

// Kill ends kip and its plugin at once (SIGKILL to its process group), as
// a crash would, and waits until kip has exited. With the aws or gce
// plugin the simulator and its instances' cells run on (the local plugin's cells
// may not: they are kip's children). Restart starts kip again.
func (k *Kip) Kill() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
}

// Restart starts kip again after Kill, with the same configuration,
// appending to its log. It does not wait for anything: the node stays
// Ready through a short outage (its lease lasts 40 s).
func (k *Kip) Restart() error {
	logFile, err := os.OpenFile(k.LogPath, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("reopening kip's log: %w", err)
	}
	k.done = make(chan struct{})
	return k.start(logFile)
}

// Signal sends sig to the kip process (not its plugin or cells): SIGHUP
// makes kip read its configuration again and swap its plugin process.
func (k *Kip) Signal(sig syscall.Signal) error {
	if err := k.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling kip: %w", err)
	}
	return nil
}

// Exited is closed once the kip process has exited.
func (k *Kip) Exited() <-chan struct{} { return k.done }

// PID is the kip process's.
func (k *Kip) PID() int { return k.cmd.Process.Pid }

// Stop stops kip (SIGTERM, then SIGKILL) and then whatever cells of its
// local plugin are still running, so that nothing outlives the tests.
func (k *Kip) Stop() {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
		<-k.done
	}
	if k.beside != nil {
		k.keepLogs() // the plugin state, and the cells, are the first kip's
		if k.removeDir {
			_ = os.RemoveAll(k.Dir)
		}
		return
	}
	if k.EC2 != nil {
		_ = k.EC2.Close() // stops the instances' cells
	}
	if k.GCE != nil {
		_ = k.GCE.Close() // stops the instances' cells
	}
	if k.Azure != nil {
		_ = k.Azure.Close() // stops the VMs' cells
	}
	if k.localCells != nil {
		_ = k.localCells.Close()
	}
	killUnder(k.StateDir)
	k.stopLightCells()
	removeNetns(k.bridge)
	k.keepLogs()
	if k.removeDir {
		// Unmounts first: a cell still running when kip stopped leaves the
		// tmpfs its agent mounted for secrets (cells outlive kip).
		if err := pod.RemoveVolumes(k.Dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing kip's directory %s: %v\n", k.Dir, err)
		}
	}
}

// killUnder kills processes whose command line names dir (cell agents).
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(data), dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeNetns deletes the network namespaces of the killed cells on
// bridge: those named kip-<id> that no process is in, whose veth (kv<id>,
// as the local plugin names them) is a port of bridge. Another run's
// cells (make e2e runs the cloud passes at once), even one whose
// namespace is still empty while its plugin sets it up, are not on it.
func removeNetns(bridge string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		id, ok := strings.CutPrefix(name, "kip-")
		if !ok || !netnsEmpty(name) {
			continue
		}
		if master, err := os.Readlink(filepath.Join("/sys/class/net", "kv"+id, "master")); err != nil || filepath.Base(master) != bridge {
			continue
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

func netnsEmpty(name string) bool {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}
