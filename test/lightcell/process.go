package lightcell

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	cellapi "github.com/kipcell/kip/cell/api"
)

// Process is a kip-light-cells process a test started (StartProcess).
type Process struct {
	cmd  *exec.Cmd
	once sync.Once
}

// StartProcess builds test/cmd/kip-light-cells and runs n light cells in
// it, the i-th with bootstrap(i) (its listenAddress set), and returns
// once they all listen. The process stops (Stop) when tb ends, if not
// before.
func StartProcess(tb testing.TB, n int, bootstrap func(i int) (*cellapi.Bootstrap, error)) *Process {
	tb.Helper()
	dir := tb.TempDir()
	bin := filepath.Join(dir, "kip-light-cells")
	if out, err := exec.CommandContext(tb.Context(), "go", "build", "-o", bin, "github.com/kipcell/kip/test/cmd/kip-light-cells").CombinedOutput(); err != nil {
		tb.Fatalf("building kip-light-cells: %v\n%s", err, out)
	}
	boots := filepath.Join(dir, "bootstraps")
	if err := os.Mkdir(boots, 0o700); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		b, err := bootstrap(i)
		if err != nil {
			tb.Fatal(err)
		}
		data, err := b.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(boots, b.CellID+".json"), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	p := &Process{cmd: exec.Command(bin, "-bootstraps", boots)}
	p.cmd.Stderr = os.Stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != fmt.Sprintf("ready %d", n) {
		tb.Fatalf("kip-light-cells said %q, %v", line, err)
	}
	return p
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop stops the process (SIGTERM: every cell stops its pod) and waits
// for it.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	})
}
