package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startLightCells starts the kip-light-cells process that hosts k's
// cells (KipOptions.LightCells), its log in k.Dir, and returns the local
// plugin's agent command: kip-light-stub handing each cell to it.
func (k *Kip) startLightCells(opts KipOptions) ([]string, error) {
	socket := filepath.Join(k.Dir, "light-cells.sock")
	k.LightCellsLog = filepath.Join(k.Dir, "light-cells.log")
	logFile, err := os.Create(k.LightCellsLog)
	if err != nil {
		return nil, fmt.Errorf("creating the light cells' log: %w", err)
	}
	defer logFile.Close() // the process has its own copy
	k.lightCells = exec.Command(filepath.Join(opts.BinDir, "kip-light-cells"), "-listen", socket,
		"-pull-delay", opts.LightPullDelay.String())
	k.lightCells.Stdout, k.lightCells.Stderr = logFile, logFile
	k.lightCells.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := k.lightCells.Start(); err != nil {
		k.lightCells = nil
		return nil, fmt.Errorf("starting kip-light-cells: %w", err)
	}
	// A stub waits a while for the socket: no need to wait for it here.
	return []string{filepath.Join(opts.BinDir, "kip-light-stub"), socket, "--bootstrap", "{bootstrap}"}, nil
}

// stopLightCells stops the kip-light-cells process, once its stubs are
// gone (then its cells have stopped) or after a while.
func (k *Kip) stopLightCells() {
	if k.lightCells == nil {
		return
	}
	_ = k.lightCells.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = k.lightCells.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = k.lightCells.Process.Kill()
		<-done
	}
	k.lightCells = nil
}
