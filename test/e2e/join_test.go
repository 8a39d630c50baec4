//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kipcell/kip/cell"
	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/pluginapi/userdata"
	"github.com/kipcell/kip/test/e2e/framework"
)

// processEnv is the environment of process pid.
func processEnv(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestUserDataHoldsNoWorkingSecret: what a cell boots from (the user data
// the EC2 simulator recorded, in the aws pass; the kip-bootstrap metadata
// item the Compute simulator recorded, in the gce pass; the bootstrap file
// the local plugin wrote, in all) holds no private key, and its join token no
// longer works once the cell joined: an agent of the cell that lost its key
// and asks again with that token and a fresh key, over the wire as the
// real agent does, is refused by kip, which says so on the pod
// (CellJoinFailed).
func TestUserDataHoldsNoWorkingSecret(t *testing.T) {
	framework.PluginPath(t)
	kipLogOnFailure(t)
	ns := f.Namespace(t)
	settle(t, ns)
	createPod(t, ns, "joined", onKip(sleeper()))
	p := f.WaitForPods(t, ns, "app=joined", 1, 90*time.Second, "running", running)[0]
	netns := cellNetns(t, p.Status.HostIP)
	pid := agentPID(t, netns)
	if pid == 0 {
		t.Fatalf("no kip-cell process in the cell's network namespace %s", netns)
	}
	env := processEnv(t, pid)
	bootFile, stateDir := env[cellapi.BootstrapEnv], env["KIP_CELL_STATE_DIR"]
	if bootFile == "" || stateDir == "" {
		t.Fatalf("the agent's environment names no bootstrap file or state directory: %q, %q", bootFile, stateDir)
	}
	booted, err := os.ReadFile(bootFile)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{"the bootstrap file " + bootFile: booted}
	if kip.Sim() != nil {
		for _, in := range instancesOf(t, p.UID) {
			sources["the user data of "+in.ID] = in.UserData
		}
		if len(sources) != 2 {
			t.Fatalf("no instance of pod %s in the %s simulator", p.Name, kip.Plugin)
		}
	}
	var token string
	for name, data := range sources {
		if bytes.Contains(data, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", name)
		}
		part, err := userdata.Bootstrap(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := cellapi.ParseBootstrap(part)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.JoinToken == "" || (token != "" && b.JoinToken != token) {
			t.Fatalf("%s has join token %q, want the cell's one token (%q)", name, b.JoinToken, token)
		}
		token = b.JoinToken
	}

	// The cell's agent loses its key and is started again: it makes a
	// new one and asks kip to join it with the token of its bootstrap,
	// spent when the cell joined.
	if err := os.RemoveAll(filepath.Join(stateDir, cell.IdentityDir)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.WaitFor(t, 60*time.Second, "a new agent in the cell", func(context.Context) (bool, error) {
		next := agentPID(t, netns)
		return next != 0 && next != pid, nil
	})
	f.WaitFor(t, 90*time.Second, "kip refusing the spent token (a CellJoinFailed event)", func(context.Context) (bool, error) {
		events := podEvents(t, ns, "joined")
		return strings.Contains(events, "Warning CellJoinFailed ") && strings.Contains(events, "the join token was spent already, for another key"), nil
	})
	if _, err := os.Stat(filepath.Join(stateDir, cell.IdentityDir, "cert.pem")); err == nil {
		t.Error("the agent that asked with the spent token holds a certificate")
	}
}
