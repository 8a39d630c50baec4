package local

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"time"
)

// A local cell's agent is its instance's service: when it exits while the
// cell runs (kill -9, a crash), the plugin starts it again, as a cloud
// instance's systemd does with kip-cell (Restart=always). The new agent
// finds its pod's state in its state directory and takes the running
// containers over, so the pod goes on; meanwhile Describe says the cell
// runs ("agent restarting"), and the host, whose status stream broke,
// subscribes again instead of declaring the cell lost.
//
// Every plugin process supervises every cell of its state directory:
// those it launches, and at Configure those it finds (a restarted plugin
// adopts the cells of the old one, whose agents are no longer its
// children). A supervisor polls the cell's record and process; a restart
// takes the cell's lock and reads the record again, so Terminate (which
// holds the lock while it stops the agent and removes the record) is never
// undone, and two plugin processes never both restart an agent.
//
// Back-off: an agent that exits within stableAfter of its start counts as
// a quick exit, and the next start waits restartInitial doubled per quick
// exit in a row (at most restartMax); after maxQuickExits quick exits in a
// row the cell is given up: terminated, "agent exited", as before there
// was supervision. The counts are in the record, so they survive a plugin
// restart.

const (
	superviseInterval = 200 * time.Millisecond
	restartInitial    = 200 * time.Millisecond
	restartMax        = 10 * time.Second
	stableAfter       = 10 * time.Second
	maxQuickExits     = 5
)

// superviseAll supervises every cell with a started agent in the state
// directory (Configure).
func (p *provider) superviseAll(cfg *config) {
	records, err := readRecords(cfg.stateDir)
	if err != nil {
		p.log.Warn("listing cells to supervise", "error", err)
		return
	}
	for _, r := range records {
		switch {
		case r.GaveUp:
			// Given up, but not yet terminated (that failed, or an older
			// plugin gave it up): end it now.
			go p.endGivenUp(cfg, r.CellID)
		case r.PID != 0:
			go p.supervise(cfg, r.CellID)
		}
	}
}

// endGivenUp terminates a cell given up whose record is still there.
func (p *provider) endGivenUp(cfg *config, cellID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := p.cellLock(ctx, cfg, cellID)
	if err != nil {
		p.log.Warn("locking a cell given up to terminate it", "cell", cellID, "error", err)
		return
	}
	defer unlock()
	r, err := readRecord(cfg.stateDir, cellID)
	if errors.Is(err, fs.ErrNotExist) {
		p.dropCellLock(cfg, cellID)
		return
	}
	if err != nil || !r.GaveUp {
		return
	}
	if _, err := p.end(ctx, cfg, r, reasonAgentExited); err != nil {
		p.log.Warn("terminating a cell given up", "cell", cellID, "error", err)
	}
}

// supervise restarts the agent of a cell whenever it is found dead, until
// the cell is terminated or given up. One supervisor per cell runs in a
// plugin process.
func (p *provider) supervise(cfg *config, cellID string) {
	p.supervisedMu.Lock()
	if p.supervised[cellID] {
		p.supervisedMu.Unlock()
		return
	}
	p.supervised[cellID] = true
	p.supervisedMu.Unlock()
	defer func() {
		p.supervisedMu.Lock()
		delete(p.supervised, cellID)
		p.supervisedMu.Unlock()
	}()
	log := p.log.With("cell", cellID)
	for {
		time.Sleep(superviseInterval)
		r, err := readRecord(cfg.stateDir, cellID)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return // terminated
		case err != nil:
			log.Warn("reading the cell's record", "error", err)
			continue
		case r.GaveUp:
			return
		case r.PID == 0 || alive(r.PID, r.StartTime):
			continue
		}
		time.Sleep(restartDelay(r.QuickExits))
		if !p.restartAgent(cfg, cellID, r.PID, log) {
			return
		}
	}
}

// restartDelay is the back-off before the start after quick quick exits
// in a row.
func restartDelay(quick int) time.Duration {
	d := restartInitial
	for range quick {
		d *= 2
		if d >= restartMax {
			return restartMax
		}
	}
	return d
}

// restartAgent starts the cell's agent again if it is still the dead
// process pid; it reports whether the cell is still to be supervised.
func (p *provider) restartAgent(cfg *config, cellID string, pid int, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := p.cellLock(ctx, cfg, cellID)
	if err != nil {
		log.Warn("locking the cell to restart its agent", "error", err)
		return true
	}
	defer unlock()
	r, err := readRecord(cfg.stateDir, cellID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Terminated meanwhile: Terminate removed the lock file, and
		// taking the lock made it again.
		p.dropCellLock(cfg, cellID)
		return false
	case err != nil:
		log.Warn("reading the cell's record", "error", err)
		return true
	case r.GaveUp:
		return false
	case r.PID != pid || alive(r.PID, r.StartTime):
		return true // restarted by another plugin process
	}
	if time.Since(r.AgentStartedAt) < stableAfter {
		r.QuickExits++
	} else {
		r.QuickExits = 0
	}
	if r.QuickExits >= maxQuickExits {
		// Given up: the instance ends, as a cloud's does when its
		// service cannot run, and holds nothing any longer (its address,
		// network, cgroups and directory), since the host does not
		// terminate an instance the plugin calls terminated.
		r.GaveUp = true
		if err := writeRecord(cfg.stateDir, r); err != nil {
			log.Warn("recording a cell given up", "error", err)
			return true
		}
		log.Error("agent keeps exiting; the cell is given up and terminated", "quick_exits", r.QuickExits)
		if _, err := p.end(ctx, cfg, r, reasonAgentExited); err != nil {
			log.Warn("terminating a cell given up", "error", err)
		}
		return false
	}
	// Counted before the start, so that an agent that cannot be started
	// at all is given up too.
	r.Restarts, r.AgentStartedAt = r.Restarts+1, time.Now().UTC()
	if err := writeRecord(cfg.stateDir, r); err != nil {
		log.Warn("recording the agent's restart", "error", err)
		return true
	}
	if err := p.spawn(cfg, r, log); err != nil {
		log.Warn("restarting the agent", "error", err)
		return true
	}
	log.Info("agent restarted", "pid", r.PID, "restarts", r.Restarts, "quick_exits", r.QuickExits)
	return true
}
