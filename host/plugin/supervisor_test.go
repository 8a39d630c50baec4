package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestOpen(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	s := open(t, testConfig(t, path))

	if got := s.cur.client.NegotiatedVersion(); got != pluginapi.ProtocolVersion {
		t.Errorf("negotiated version = %d, want %d", got, pluginapi.ProtocolVersion)
	}
	if info := s.Info(); info.Name != "fake" || info.Version != "1.0.0" {
		t.Errorf("Info() = %+v, want fake 1.0.0", info)
	}
	sum, err := FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.SHA256() != sum || s.Path() != path {
		t.Errorf("SHA256(), Path() = %s, %s; want %s, %s", s.SHA256(), s.Path(), sum, path)
	}
	ctx := t.Context()
	// Configured by Open: Launch works.
	resp, err := s.Client().Launch(ctx, launchReq("cell-a"))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if resp.Instance.Tags[pluginapi.TagCluster] != "c1" {
		t.Errorf("instance tags = %v, want cluster c1 from Config.Configure", resp.Instance.Tags)
	}
	pid := s.Pid()
	if !alive(pid) {
		t.Fatalf("plugin process %d not running", pid)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	eventually(t, 5*time.Second, "plugin process to end", func() bool { return !alive(pid) })
	if _, err := s.Client().List(ctx, &pluginapi.ListRequest{}); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(s.sockDir); !os.IsNotExist(err) {
		t.Errorf("socket directory %s left after Close: %v", s.sockDir, err)
	}
}

func TestOpenFind(t *testing.T) {
	dir, path := installPlugin(t, pluginV1)
	cfg := testConfig(t, "")
	cfg.Dir = dir
	s := open(t, cfg)
	if s.Path() != path {
		t.Errorf("Path() = %s, want %s", s.Path(), path)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	_, plugin := installPlugin(t, pluginV1)
	_, other := installPlugin(t, pluginV2)
	otherSum, _ := FileSHA256(other)
	pluginSum, _ := FileSHA256(plugin)
	// kip-plugin-toy2 whose GetInfo says toy, found in its directory.
	toyDir := t.TempDir()
	toy2 := filepath.Join(toyDir, BinaryPrefix+"toy2")
	replaceBinary(t, pluginV1, toy2)

	tests := []struct {
		name     string
		path     string
		cfg      func(*Config)
		wantKind error
		wantMsg  string
	}{
		{
			name:     "missing",
			path:     filepath.Join(dir, "kip-plugin-fake"),
			wantKind: ErrMissing,
			wantMsg:  "no plugin binary at " + filepath.Join(dir, "kip-plugin-fake"),
		},
		{
			name: "chatty script",
			// The script forks a child that would keep go-plugin's pipes
			// open; neither may outlive the failed start.
			path:     writeScript(t, filepath.Join(dir, "chatty"), "echo $$ >> "+pidFile+"\nsleep 60 &\necho $! >> "+pidFile+"\necho hello from a script\nwait\n"),
			wantKind: ErrNotPlugin,
			wantMsg:  `not a Kip plugin: no go-plugin handshake, it printed "hello from a script"`,
		},
		{
			name:     "true",
			path:     writeScript(t, filepath.Join(dir, "true"), "exit 0\n"),
			wantKind: ErrNotPlugin,
			wantMsg:  "not a Kip plugin: it exited before the go-plugin handshake",
		},
		{
			name:     "silent script",
			path:     writeScript(t, filepath.Join(dir, "silent"), "echo $$ >> "+pidFile+"\nexec sleep 60\n"),
			cfg:      func(c *Config) { c.StartTimeout = 500 * time.Millisecond },
			wantKind: ErrStartTimeout,
			wantMsg:  "start timeout: no go-plugin handshake",
		},
		{
			name:     "protocol 99",
			path:     plugin,
			cfg:      func(c *Config) { c.Env = []string{"KIP_TESTPLUGIN_PROTOCOL=99"} },
			wantKind: ErrIncompatible,
			wantMsg:  "incompatible API version: Plugin version: 99, Client versions: [1]",
		},
		{
			name:     "checksum mismatch",
			path:     plugin,
			cfg:      func(c *Config) { c.SHA256 = otherSum },
			wantKind: ErrChecksum,
			wantMsg:  "checksum mismatch: pinned sha256 " + otherSum + ", file has " + pluginSum,
		},
		{
			name:     "bad pin",
			path:     plugin,
			cfg:      func(c *Config) { c.SHA256 = "abc" },
			wantKind: ErrChecksum,
			wantMsg:  `pinned sha256 "abc" is not 64 hex digits`,
		},
		{
			name: "name mismatch in the plugin directory",
			path: toy2,
			cfg: func(c *Config) {
				c.Name, c.Path, c.Dir = "toy2", "", toyDir
				c.Env = []string{"KIP_TESTPLUGIN_NAME=toy"}
			},
			wantKind: ErrNameMismatch,
			wantMsg:  `name mismatch: kip-plugin-toy2 reports the name "toy", not "toy2" (a plugin's file is named kip-plugin-<its name>)`,
		},
		{
			name:     "name mismatch by path",
			path:     plugin,
			cfg:      func(c *Config) { c.Env = []string{"KIP_TESTPLUGIN_NAME=toy"} },
			wantKind: ErrNameMismatch,
			wantMsg:  `name mismatch: kip-plugin-fake reports the name "toy", not the configured name "fake"`,
		},
		{
			name: "invalid config",
			path: plugin,
			cfg: func(c *Config) {
				c.Configure = &pluginapi.ConfigureRequest{ClusterID: "c1", Config: []byte(`{"fail":"yes"}`)}
			},
			wantMsg: `configuring plugin: invalid config: fail: `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(pidFile)
			cfg := testConfig(t, tt.path)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			start := time.Now()
			s, err := Open(t.Context(), cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open error after %s: %v", time.Since(start).Round(time.Millisecond), err)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Open error %v (%T) is not an *Error", err, err)
			}
			if tt.wantKind != nil && !errors.Is(err, tt.wantKind) {
				t.Errorf("Open error %v does not match %v", err, tt.wantKind)
			}
			prefix := fmt.Sprintf("plugin %s (%s): ", cfg.Name, tt.path)
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.wantMsg) || strings.Contains(msg, "\n") {
				t.Errorf("Open error = %q; want one line starting %q containing %q", msg, prefix, tt.wantMsg)
			}
			if tt.name == "invalid config" {
				var ic *pluginapi.InvalidConfigError
				if !errors.As(err, &ic) || ic.Key != "fail" {
					t.Errorf("Open error %v: want an InvalidConfigError with key fail", err)
				}
			}
			// No process left behind: neither the binary nor what a
			// script forked.
			eventually(t, 5*time.Second, "no process left", func() bool { return len(procsRunning(tt.path)) == 0 })
			if data, err := os.ReadFile(pidFile); err == nil {
				for _, f := range strings.Fields(string(data)) {
					pid, _ := strconv.Atoi(f)
					eventually(t, 5*time.Second, "process "+f+" to end", func() bool { return !alive(pid) })
				}
			}
		})
	}
}

func TestPinnedRestart(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	sum, err := FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, path)
	cfg.SHA256 = strings.ToUpper(sum)
	s := open(t, cfg)
	// Two restarts: a reused SecureConfig hash would refuse the second start.
	for i := range 2 {
		old := killPlugin(t, s)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		if _, err := s.Client().List(ctx, &pluginapi.ListRequest{}); err != nil {
			t.Fatalf("List after kill %d: %v", i, err)
		}
		cancel()
		if pid := s.Pid(); pid == old || pid == 0 {
			t.Fatalf("Pid() = %d after kill %d of %d; want a new process", pid, i, old)
		}
	}
}

func TestKillDuringCalls(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	state := filepath.Join(t.TempDir(), "state.json")
	s := open(t, testConfig(t, path, "KIP_FAKE_STATE="+state, "KIP_TESTPLUGIN_SLOW=300ms"))
	c := s.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	before := map[string]string{}
	for i := range 3 {
		cell := fmt.Sprintf("before-%d", i)
		resp, err := c.Launch(ctx, launchReq(cell))
		if err != nil {
			t.Fatalf("Launch %s: %v", cell, err)
		}
		before[cell] = resp.Instance.ID
	}

	const calls = 8
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = c.Launch(ctx, launchReq(fmt.Sprintf("during-%d", i)))
			} else {
				_, err = c.List(ctx, &pluginapi.ListRequest{})
			}
			errs <- err
		})
	}
	time.Sleep(100 * time.Millisecond) // the calls are sleeping in the plugin
	old := killPlugin(t, s)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call during kill -9: %v", err)
		}
	}
	if pid := s.Pid(); pid == old || pid == 0 {
		t.Errorf("Pid() = %d, want a new process (old %d)", pid, old)
	}
	cells := listedCells(t, c)
	for cell, id := range before {
		if cells[cell] != id {
			t.Errorf("after restart, cell %s lists instance %q, want %q", cell, cells[cell], id)
		}
	}
	for i := 0; i < calls; i += 2 {
		if cell := fmt.Sprintf("during-%d", i); cells[cell] == "" {
			t.Errorf("after restart, cell %s (launched during the kill) is not listed", cell)
		}
	}
}

func TestWatchEventsResubscribes(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	s := open(t, testConfig(t, path))
	c := s.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	events := make(chan *pluginapi.Event, 16)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- c.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			events <- e
			return nil
		})
	}()
	waitCell := func(cell string) {
		t.Helper()
		// The stream may not be subscribed yet: launch until an event of
		// the cell arrives (Launch is idempotent per cell).
		for {
			if _, err := c.Launch(ctx, launchReq(cell)); err != nil {
				t.Fatalf("Launch %s: %v", cell, err)
			}
			select {
			case e := <-events:
				if e.CellID == cell {
					return
				}
			case <-time.After(200 * time.Millisecond):
				// Launch of a launched cell emits nothing: use a new cell.
				cell += "x"
			case <-ctx.Done():
				t.Fatalf("no event for cell %s", cell)
			}
		}
	}
	waitCell("first")
	killPlugin(t, s)
	waitCell("second")
	cancel()
	if err := <-watchDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("WatchEvents returned %v, want nil or context.Canceled", err)
	}
}

func TestReload(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	state := filepath.Join(t.TempDir(), "state.json")
	cfg := testConfig(t, path, "KIP_FAKE_STATE="+state, "KIP_TESTPLUGIN_SLOW=300ms")
	s := open(t, cfg)
	c := s.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	before, err := c.Launch(ctx, launchReq("before"))
	if err != nil {
		t.Fatal(err)
	}
	oldPid, oldSum := s.Pid(), s.SHA256()

	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := c.List(ctx, &pluginapi.ListRequest{})
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond) // the calls are in flight on the old process
	replaceBinary(t, pluginV2, path)
	if err := s.Reload(ctx, ReloadConfig{Configure: cfg.Configure}); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call in flight during Reload: %v", err)
		}
	}
	if v := s.Info().Version; v != "2.0.0" {
		t.Errorf("Info().Version after Reload = %q, want 2.0.0", v)
	}
	if s.SHA256() == oldSum {
		t.Error("SHA256() unchanged after Reload of a new binary")
	}
	if alive(oldPid) {
		t.Errorf("old plugin process %d still running after Reload", oldPid)
	}
	if cells := listedCells(t, c); cells["before"] != before.Instance.ID {
		t.Errorf("after Reload, cell before lists %q, want %q", cells["before"], before.Instance.ID)
	}
}

func TestPermanentFailure(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	log, logs := testLogger(t)
	cfg := testConfig(t, path)
	cfg.Logger = log
	cfg.CallWait = 700 * time.Millisecond
	s := open(t, cfg)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	killPlugin(t, s)

	start := time.Now()
	_, err := s.Client().List(t.Context(), &pluginapi.ListRequest{})
	waited := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !pluginapi.IsTransient(err) {
		t.Fatalf("List with the binary gone = %v; want ErrUnavailable, transient", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "plugin fake ("+path+")") || !strings.Contains(msg, "no plugin binary at") {
		t.Errorf("List error = %q, want plugin, path and cause", msg)
	}
	if waited < cfg.CallWait/2 || waited > 10*time.Second {
		t.Errorf("List failed after %s, want about CallWait %s", waited, cfg.CallWait)
	}
	// A caller's deadline shorter than CallWait wins.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Client().List(ctx, &pluginapi.ListRequest{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("List with a short deadline = %v, want DeadlineExceeded", err)
	}
	if out := logs.String(); !strings.Contains(out, "restarting plugin failed") || !strings.Contains(out, "attempt=2") {
		t.Errorf("log lacks the failing restart attempts:\n%s", out)
	}

	// Putting the binary back ends the outage.
	replaceBinary(t, pluginV1, path)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel2()
	eventually(t, 20*time.Second, "plugin back", func() bool {
		_, err := s.Client().List(ctx2, &pluginapi.ListRequest{})
		return err == nil
	})
}
