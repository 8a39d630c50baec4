package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// configured returns the configurations the test plugin processes were
// given, by pid, from their KIP_TESTPLUGIN_CONFIGURED file.
func configured(t *testing.T, file string) map[int]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		pid, conf, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatalf("line %q of %s: %v", line, file, err)
		}
		out[n] = conf
	}
	return out
}

func sha(t *testing.T, path string) string {
	t.Helper()
	sum, err := FileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func configureReq(config string) *pluginapi.ConfigureRequest {
	return &pluginapi.ConfigureRequest{ClusterID: "c1", NodeName: "n1", Config: []byte(config)}
}

// An upgrade of a pinned plugin: the new binary with its new pin and a new
// configuration is swapped in, the log says what was replaced by what, and
// a crash afterwards restarts the plugin with the new configuration and
// checks the new pin.
func TestReloadNewPinAndConfig(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	sum1 := sha(t, path)
	confFile := filepath.Join(t.TempDir(), "configured")
	log, logs := testLogger(t)
	cfg := testConfig(t, path, "KIP_TESTPLUGIN_CONFIGURED="+confFile)
	cfg.Logger = log
	cfg.SHA256 = sum1
	cfg.Configure = configureReq(`{"generation":1}`)
	s := open(t, cfg)
	oldPid := s.Pid()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// The operator writes the new binary beside the old one, moves it
	// over, and pins its checksum.
	replaceBinary(t, pluginV2, path)
	sum2 := sha(t, path)
	if err := s.Reload(ctx, ReloadConfig{SHA256: sum2, Configure: configureReq(`{"generation":2}`)}); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	newPid := s.Pid()
	if v := s.Info().Version; v != "2.0.0" || s.SHA256() != sum2 || newPid == oldPid {
		t.Errorf("after Reload: version %s, sha256 %s, pid %d; want 2.0.0, %s, a new pid (old %d)", v, s.SHA256(), newPid, sum2, oldPid)
	}
	if got := configured(t, confFile)[newPid]; got != `{"generation":2}` {
		t.Errorf("the new process was configured with %q, want the new configuration", got)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "plugin reloaded") {
			line = l
		}
	}
	for _, want := range []string{"plugin=fake", "path=" + path, "version=2.0.0", "sha256=" + sum2, "old_version=1.0.0", "old_sha256=" + sum1,
		"pid=" + strconv.Itoa(newPid), "old_pid=" + strconv.Itoa(oldPid)} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %s", line, want)
		}
	}
	eventually(t, 10*time.Second, "the old process to end", func() bool { return !alive(oldPid) })

	// A crash restarts the plugin with the new configuration.
	killPlugin(t, s)
	if _, err := s.Client().List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatalf("List after the crash: %v", err)
	}
	restarted := s.Pid()
	if got := configured(t, confFile)[restarted]; got != `{"generation":2}` {
		t.Errorf("the process restarted after the crash was configured with %q, want the new configuration", got)
	}

	// And checks the new pin: the old binary, which the old pin allowed,
	// is refused.
	replaceBinary(t, pluginV1, path)
	killPlugin(t, s)
	wantMismatch := "checksum mismatch: pinned sha256 " + sum2 + ", file has " + sum1
	eventually(t, 20*time.Second, "a restart refused for the new pin", func() bool {
		return strings.Contains(logs.String(), wantMismatch)
	})
	replaceBinary(t, pluginV2, path)
	if _, err := s.Client().List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatalf("List once the pinned binary is back: %v", err)
	}
	if v := s.Info().Version; v != "2.0.0" {
		t.Errorf("version after the restart = %s, want 2.0.0", v)
	}
}

// A Reload that fails its checks leaves the running process serving with
// its pin and configuration, and returns one line naming the plugin, its
// path and the cause.
func TestReloadRefused(t *testing.T) {
	tests := []struct {
		name string
		// prepare replaces the binary and returns the reload's pin and
		// configuration; sum1 and sum2 are the checksums of v1 and v2.
		prepare  func(t *testing.T, path, sum1, sum2 string) ReloadConfig
		wantKind error
		wantMsg  func(sum1, sum2 string) string
	}{
		{
			name: "checksum mismatch",
			prepare: func(t *testing.T, path, sum1, _ string) ReloadConfig {
				replaceBinary(t, pluginV2, path)
				return ReloadConfig{SHA256: sum1, Configure: configureReq(`{}`)}
			},
			wantKind: ErrChecksum,
			wantMsg: func(sum1, sum2 string) string {
				return "reloading: checksum mismatch: pinned sha256 " + sum1 + ", file has " + sum2
			},
		},
		{
			name: "pin not hex",
			prepare: func(t *testing.T, path, _, _ string) ReloadConfig {
				replaceBinary(t, pluginV2, path)
				return ReloadConfig{SHA256: "v2", Configure: configureReq(`{}`)}
			},
			wantKind: ErrChecksum,
			wantMsg: func(_, _ string) string {
				return `reloading: checksum mismatch: pinned sha256 "v2" is not 64 hex digits`
			},
		},
		{
			name: "configuration refused by the plugin",
			prepare: func(t *testing.T, path, _, sum2 string) ReloadConfig {
				replaceBinary(t, pluginV2, path)
				return ReloadConfig{SHA256: sum2, Configure: configureReq(`{"fail":"please"}`)}
			},
			wantMsg: func(_, _ string) string {
				return `reloading: configuring plugin: invalid config: fail: config asks Configure to fail with "please"`
			},
		},
		{
			name: "not a plugin",
			prepare: func(t *testing.T, path, _, _ string) ReloadConfig {
				writeScript(t, path+".new", "echo not a plugin\n")
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
				return ReloadConfig{Configure: configureReq(`{}`)}
			},
			wantKind: ErrNotPlugin,
			wantMsg: func(_, _ string) string {
				return `reloading: not a Kip plugin: no go-plugin handshake, it printed "not a plugin"`
			},
		},
		{
			name: "another plugin's name",
			prepare: func(t *testing.T, path, _, _ string) ReloadConfig {
				writeScript(t, path+".new", "KIP_TESTPLUGIN_NAME=toy exec "+pluginV2+"\n")
				if err := os.Rename(path+".new", path); err != nil {
					t.Fatal(err)
				}
				return ReloadConfig{Configure: configureReq(`{}`)}
			},
			wantKind: ErrNameMismatch,
			wantMsg: func(_, _ string) string {
				return `reloading: name mismatch: kip-plugin-fake reports the name "toy", not the configured name "fake"`
			},
		},
	}
	_, p2 := installPlugin(t, pluginV2)
	sum2 := sha(t, p2)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path := installPlugin(t, pluginV1)
			sum1 := sha(t, path)
			confFile := filepath.Join(t.TempDir(), "configured")
			cfg := testConfig(t, path, "KIP_TESTPLUGIN_CONFIGURED="+confFile)
			cfg.SHA256 = sum1
			cfg.Configure = configureReq(`{"generation":1}`)
			s := open(t, cfg)
			oldPid := s.Pid()

			err := s.Reload(t.Context(), tt.prepare(t, path, sum1, sum2))
			if err == nil {
				t.Fatal("Reload succeeded")
			}
			var e *Error
			if !errors.As(err, &e) || (tt.wantKind != nil && !errors.Is(err, tt.wantKind)) {
				t.Errorf("Reload = %v; want an *Error matching %v", err, tt.wantKind)
			}
			if want := "plugin fake (" + path + "): " + tt.wantMsg(sum1, sum2); err.Error() != want {
				t.Errorf("Reload error\n got %q\nwant %q", err, want)
			}
			if s.Pid() != oldPid || s.Info().Version != "1.0.0" || s.SHA256() != sum1 {
				t.Errorf("after the refused Reload: pid %d, version %s, sha256 %s; want %d, 1.0.0, %s",
					s.Pid(), s.Info().Version, s.SHA256(), oldPid, sum1)
			}
			if _, err := s.Client().Launch(t.Context(), launchReq("after")); err != nil {
				t.Errorf("Launch after the refused Reload: %v", err)
			}
			// Only the old process runs; the refused one is gone.
			eventually(t, 10*time.Second, "only the old process running", func() bool {
				pids := procsRunning(path)
				return len(pids) == 1 && pids[0] == oldPid
			})
			// The old configuration and pin stay those of later restarts.
			replaceBinary(t, pluginV1, path)
			killPlugin(t, s)
			if _, err := s.Client().List(t.Context(), &pluginapi.ListRequest{}); err != nil {
				t.Fatalf("List after a crash: %v", err)
			}
			if got := configured(t, confFile)[s.Pid()]; got != `{"generation":1}` {
				t.Errorf("after a crash the plugin was configured with %q, want the old configuration", got)
			}
		})
	}
}

// Run waits for ctx to end and then closes the Supervisor.
func TestRunCloses(t *testing.T) {
	_, path := installPlugin(t, pluginV1)
	s := open(t, testConfig(t, path))
	pid := s.Pid()
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(ctx) }()
	cancel()
	if err := <-runDone; err != nil {
		t.Errorf("Run = %v", err)
	}
	if _, err := s.Client().List(t.Context(), &pluginapi.ListRequest{}); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Run returned = %v, want ErrClosed", err)
	}
	eventually(t, 5*time.Second, "plugin processes to end", func() bool { return !alive(pid) && len(procsRunning(path)) == 0 })
}
