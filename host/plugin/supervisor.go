package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kipcell/kip/pluginapi"
)

// Defaults for Config.
const (
	DefaultStartTimeout = 20 * time.Second
	DefaultCallWait     = 30 * time.Second
)

// stableAfter is how long a plugin process must run before a crash starts
// the backoff from the first attempt again.
const stableAfter = time.Minute

// exitGrace is how long a call that lost its connection waits for the
// process exit to be noticed before it pings the process.
const exitGrace = 2 * time.Second

// maxCallTries bounds how often one call is sent: the first try and the
// retries after losing the plugin.
const maxCallTries = 3

// Config says which plugin to run and how. Its fields with a koanf tag
// are the plugin section of kip.yaml (config.go: DefaultConfig, Validate);
// the daemon sets the others.
type Config struct {
	// Name is the plugin's name, the <name> of kip-plugin-<name>; the
	// plugin must report it in GetInfo. Empty means the name in Path's
	// file name.
	Name string `koanf:"name"`
	// Dir is the plugin directory searched when Path is empty.
	Dir string `koanf:"dir"`
	// Path is the binary; empty means Find(Dir, Name).
	Path string `koanf:"path"`
	// SHA256 optionally pins the binary's hex SHA-256: a binary with
	// another checksum is refused at every start.
	SHA256 string `koanf:"sha256"`
	// Settings are the plugin's own settings (plugin.config), free-form
	// for kip: the plugin validates them. The daemon sends them in
	// Configure as a JSON object (SettingsJSON).
	Settings map[string]any `koanf:"config"`
	// Env is added to the host's environment for the plugin process.
	Env []string `koanf:"-"`
	// Configure is sent after every start and restart of the plugin
	// process; nil means the plugin is not configured.
	Configure *pluginapi.ConfigureRequest `koanf:"-"`
	// Logger receives the supervisor's and the plugin's logs, with
	// attribute plugin=<name>; nil means slog.Default().
	Logger *slog.Logger `koanf:"-"`
	// LogLevel is the plugin's log level (debug, info, warn, error); empty
	// means the lowest level Logger logs.
	LogLevel string `koanf:"-"`
	// StartTimeout bounds one start: handshake, GetInfo and Configure.
	// Zero means DefaultStartTimeout.
	StartTimeout time.Duration `koanf:"-"`
	// CallWait is how long a call waits for a restarting plugin, and how
	// long Reload lets calls on the old process finish. Zero means
	// DefaultCallWait.
	CallWait time.Duration `koanf:"-"`
	// Backoff returns the wait before restart attempt attempt (1, 2, …);
	// nil means DefaultBackoff.
	Backoff func(attempt int) time.Duration `koanf:"-"`
	// Calls, when set, is told of every call to the plugin process
	// (UnaryInterceptor); the daemon sets host/metrics' Metrics.
	Calls CallObserver `koanf:"-"`
}

// DefaultBackoff is exponential from 200ms, capped at 30s, with jitter: the
// wait is uniform in [d/2, d].
func DefaultBackoff(attempt int) time.Duration {
	const base, limit = 200 * time.Millisecond, 30 * time.Second
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1) //nolint:gosec // backoff jitter needs no cryptographic randomness
}

// Supervisor runs one plugin process, restarts it when it dies and swaps it
// on Reload. Client gives a pluginapi.Client that survives both.
type Supervisor struct {
	name string
	path string
	// explicit: the path was given (Config.Path), not found in Dir.
	explicit bool
	cfg      Config
	log      *slog.Logger
	level    string
	sockDir  string
	client   *routingClient

	stop       context.Context
	cancelStop context.CancelFunc
	wg         sync.WaitGroup
	reloadMu   sync.Mutex
	closeOnce  sync.Once

	mu        sync.Mutex
	cur       *proc         // nil while restarting
	changed   chan struct{} // closed and replaced whenever cur changes
	lastErr   error         // why there is no process
	attempt   int           // restart attempts since the last stable process
	info      *pluginapi.GetInfoResponse
	sha       string
	pin       []byte                      // every start's pinned SHA-256; nil: none
	configure *pluginapi.ConfigureRequest // sent after every start
	closed    bool
}

// proc is one plugin process.
type proc struct {
	client  *plugin.Client
	rpc     plugin.ClientProtocol
	api     pluginapi.Client
	info    *pluginapi.GetInfoResponse
	sha     string
	pid     int
	started time.Time
	// done is closed when the process has exited.
	done <-chan struct{}
	// retired ends when the process is no longer the current one.
	retired  context.Context
	retire   context.CancelFunc
	inflight sync.WaitGroup
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return p.client.Exited()
	}
}

// kill ends the process: go-plugin closes the connection, lets the plugin
// exit for up to 2s, then kills it.
func (p *proc) kill() {
	p.retire()
	p.client.Kill()
}

// Open starts the plugin, checks it and configures it, and returns once it
// is ready; the Supervisor then keeps it running until Close. Every failure
// is an *Error naming the plugin, its path and the cause (matching one of
// the Err kinds, or a pluginapi.InvalidConfigError), and leaves no process
// behind.
func Open(ctx context.Context, cfg Config) (*Supervisor, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.CallWait <= 0 {
		cfg.CallWait = DefaultCallWait
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	name, path := cfg.Name, cfg.Path
	if path == "" {
		found, err := find(cfg.Dir, name)
		if err != nil {
			return nil, &Error{Plugin: name, Path: filepath.Join(cfg.Dir, BinaryPrefix+name), Err: err}
		}
		path = found
	}
	if name == "" {
		name = nameOf(path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	pin, err := parsePin(cfg.SHA256)
	if err != nil {
		return nil, &Error{Plugin: name, Path: path, Err: err}
	}
	level := cfg.LogLevel
	if level == "" {
		level = levelName(cfg.Logger)
	}
	sockDir, err := os.MkdirTemp("", "kip-plugin-"+name+"-")
	if err != nil {
		return nil, &Error{Plugin: name, Path: path, Err: fmt.Errorf("creating socket directory: %w", err)}
	}
	stop, cancel := context.WithCancel(context.Background())
	s := &Supervisor{
		name:       name,
		path:       path,
		explicit:   cfg.Path != "",
		pin:        pin,
		cfg:        cfg,
		log:        cfg.Logger.With("plugin", name),
		level:      level,
		sockDir:    sockDir,
		stop:       stop,
		cancelStop: cancel,
		changed:    make(chan struct{}),
		configure:  cfg.Configure,
	}
	s.client = &routingClient{s: s}
	p, err := s.spawn(ctx, start{pin: pin, configure: cfg.Configure})
	if err != nil {
		cancel()
		os.RemoveAll(sockDir)
		return nil, s.wrap(err)
	}
	s.install(p, true, nil)
	s.log.Info("plugin started", "path", path, "pid", p.pid, "version", p.info.Version,
		"protocol", p.client.NegotiatedVersion(), "sha256", p.sha)
	return s, nil
}

// parsePin decodes a pinned hex SHA-256; empty means no pin.
func parsePin(sum string) ([]byte, error) {
	if sum == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(sum)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: pinned sha256 %q is not 64 hex digits", ErrChecksum, sum)
	}
	return b, nil
}

func (s *Supervisor) wrap(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Plugin: s.name, Path: s.path, Err: err}
}

// levelName is the plugin log level matching the lowest level log logs.
func levelName(log *slog.Logger) string {
	ctx := context.Background()
	switch {
	case log.Enabled(ctx, slog.LevelDebug):
		return "debug"
	case log.Enabled(ctx, slog.LevelInfo):
		return "info"
	case log.Enabled(ctx, slog.LevelWarn):
		return "warn"
	default:
		return "error"
	}
}

// doneCapture wraps the provider's go-plugin adapter to keep the context
// go-plugin hands to GRPCClient, which it cancels when the process exits.
type doneCapture struct {
	plugin.NetRPCUnsupportedPlugin
	inner plugin.GRPCPlugin
	done  context.Context
}

func (d *doneCapture) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	return d.inner.GRPCServer(b, s)
}

func (d *doneCapture) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	d.done = ctx
	return d.inner.GRPCClient(ctx, b, cc)
}

// dialOptions are pluginapi's dial options and, when Config.Calls is set,
// the interceptor that tells it of every call.
func (s *Supervisor) dialOptions() []grpc.DialOption {
	opts := pluginapi.GRPCDialOptions()
	if s.cfg.Calls != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(UnaryInterceptor(s.cfg.Calls)))
	}
	return opts
}

// start is what one start of the plugin checks and sends: the pin and the
// configuration.
type start struct {
	pin       []byte
	configure *pluginapi.ConfigureRequest
}

// current is the start a restart makes: the pin and configuration of the
// last Open, Reload or Configure.
func (s *Supervisor) current() start {
	s.mu.Lock()
	defer s.mu.Unlock()
	return start{pin: s.pin, configure: s.configure}
}

// spawn starts a new plugin process and brings it to ready: pin, handshake,
// protocol version, GetInfo with a compatible API version and the plugin's
// name, Configure. On failure no process is left.
func (s *Supervisor) spawn(ctx context.Context, st start) (*proc, error) {
	if err := checkExecutable(s.path); err != nil {
		return nil, err
	}
	sum, err := FileSHA256(s.path)
	if err != nil {
		return nil, &kindError{ErrMissing, err.Error()}
	}
	var secure *plugin.SecureConfig
	if st.pin != nil {
		if want := hex.EncodeToString(st.pin); sum != want {
			return nil, &kindError{ErrChecksum, fmt.Sprintf("checksum mismatch: pinned sha256 %s, file has %s", want, sum)}
		}
		// A fresh hash every time: SecureConfig.Check never resets it.
		secure = &plugin.SecureConfig{Checksum: st.pin, Hash: sha256.New()}
	}

	capture := &doneCapture{}
	sets := map[int]plugin.PluginSet{}
	for v, set := range pluginapi.PluginSets(nil) {
		ws := plugin.PluginSet{}
		for n, pl := range set {
			if g, ok := pl.(plugin.GRPCPlugin); ok && n == pluginapi.PluginName {
				capture.inner = g
				ws[n] = capture
			} else {
				ws[n] = pl
			}
		}
		sets[v] = ws
	}

	cmd := exec.Command(s.path)
	cmd.Env = append(append(os.Environ(), s.cfg.Env...),
		pluginapi.LogLevelEnv+"="+s.level,
		plugin.EnvUnixSocketDir+"="+s.sockDir)
	// Pdeathsig: the plugin dies with the host. Setpgid: a failed start can
	// kill whatever the binary forked along with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stderr := &headBuffer{max: 2048}
	hl := newHCLog(s.log, filepath.Base(s.path))
	pluginOut := &stdWriter{a: hl.Named(filepath.Base(s.path)).(*hclogAdapter)}
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginapi.Handshake,
		VersionedPlugins: sets,
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  s.dialOptions(),
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: s.sockDir},
		StartTimeout:     s.cfg.StartTimeout,
		Logger:           hl,
		Stderr:           stderr,
		SyncStdout:       pluginOut,
		SyncStderr:       pluginOut,
		SkipHostEnv:      true,
	})
	started := time.Now()
	rpc, err := c.Client()
	if err != nil {
		killGroup(c)
		c.Kill()
		return nil, classifyStart(err, stderr.String())
	}
	p := &proc{client: c, rpc: rpc, sha: sum, started: started}
	p.pid, _ = strconv.Atoi(c.ID())
	p.retired, p.retire = context.WithCancel(context.Background())
	fail := func(err error) (*proc, error) {
		p.kill()
		return nil, err
	}
	if v := c.NegotiatedVersion(); v != pluginapi.ProtocolVersion {
		return fail(&kindError{ErrIncompatible, fmt.Sprintf("incompatible API version: plugin serves protocol version %d, kip speaks %d", v, pluginapi.ProtocolVersion)})
	}
	raw, err := rpc.Dispense(pluginapi.PluginName)
	if err != nil {
		return fail(fmt.Errorf("dispensing plugin: %w", err))
	}
	api, ok := raw.(pluginapi.Client)
	if !ok {
		return fail(fmt.Errorf("dispensing plugin: got %T, not a pluginapi.Client", raw))
	}
	p.api = api
	if capture.done != nil {
		p.done = capture.done.Done()
	} else {
		p.done = pollExited(c)
	}

	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	info, err := api.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		if errors.Is(err, pluginapi.ErrNoCompatibleAPIVersion) {
			return fail(&kindError{ErrIncompatible, "incompatible API version: " + err.Error()})
		}
		return fail(startErr(ctx, "getting plugin info", err))
	}
	if _, ok := pluginapi.CompatibleAPIVersion(info.APIVersions); !ok {
		return fail(&kindError{ErrIncompatible, fmt.Sprintf("incompatible API version: plugin implements %q, kip needs major %d", info.APIVersions, pluginapi.ProtocolVersion)})
	}
	p.info = info
	if info.Name != s.name {
		return fail(&kindError{ErrNameMismatch, nameMismatch(filepath.Base(s.path), info.Name, s.name, s.explicit)})
	}
	if st.configure != nil {
		resp, err := api.Configure(ctx, st.configure)
		if err != nil {
			return fail(startErr(ctx, "configuring plugin", err))
		}
		for _, w := range resp.Warnings {
			s.log.Warn("plugin configuration warning", "warning", w)
		}
	}
	return p, nil
}

// startErr wraps a failed call during a start, as a start timeout when the
// start ran out of time.
func startErr(ctx context.Context, doing string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ErrStartTimeout, doing, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// killGroup kills the process group of a plugin whose start failed, so that
// a script's children do not outlive it (and keep go-plugin's pipes open).
func killGroup(c *plugin.Client) {
	if pid, err := strconv.Atoi(c.ID()); err == nil && pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// classifyStart turns go-plugin's start errors into this package's kinds.
func classifyStart(err error, stderr string) error {
	msg := err.Error()
	withStderr := func(s string) string {
		if line := firstLine(stderr); line != "" {
			s += "; stderr: " + line
		}
		return s
	}
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return &kindError{ErrChecksum, "checksum mismatch: the binary changed while it was being started"}
	case strings.HasPrefix(msg, "error verifying checksum"):
		return &kindError{ErrMissing, msg}
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return &kindError{ErrStartTimeout, withStderr("start timeout: no go-plugin handshake within the start timeout (not a Kip plugin?)")}
	case strings.Contains(msg, "plugin exited before we could connect"):
		return &kindError{ErrNotPlugin, withStderr("not a Kip plugin: it exited before the go-plugin handshake")}
	case strings.HasPrefix(msg, "Unrecognized remote plugin message: "):
		line := firstLine(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "))
		if line == "" || strings.HasPrefix(line, "Failed to read any lines") {
			return &kindError{ErrNotPlugin, withStderr("not a Kip plugin: it exited before the go-plugin handshake without output")}
		}
		return &kindError{ErrNotPlugin, withStderr(fmt.Sprintf("not a Kip plugin: no go-plugin handshake, it printed %q", line))}
	case strings.HasPrefix(msg, "incompatible API version with plugin"):
		return &kindError{ErrIncompatible, "incompatible API version: " + strings.TrimPrefix(msg, "incompatible API version with plugin. ")}
	case strings.HasPrefix(msg, "incompatible core API version"), strings.HasPrefix(msg, "unsupported plugin protocol"):
		return &kindError{ErrIncompatible, "incompatible API version: " + firstLine(msg)}
	case errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EACCES), strings.Contains(msg, "exec format error"):
		return &kindError{ErrNotPlugin, "not a Kip plugin: " + msg}
	}
	return fmt.Errorf("starting plugin: %w", err)
}

// pollExited is the exit signal when go-plugin gave no context.
func pollExited(c *plugin.Client) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !c.Exited() {
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return done
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// install makes p the current process and starts supervising it. With
// replace false it does nothing (and reports false) when there already is a
// current process. With st, p was started with a new pin and configuration,
// which later restarts then use. It returns the process p replaced.
func (s *Supervisor) install(p *proc, replace bool, st *start) (old *proc, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (!replace && s.cur != nil) {
		return nil, false
	}
	if st != nil {
		s.pin, s.configure = st.pin, st.configure
	}
	old = s.cur
	s.cur = p
	s.info, s.sha = p.info, p.sha
	s.lastErr = nil
	s.notifyLocked()
	s.wg.Add(1)
	go s.supervise(p)
	return old, true
}

func (s *Supervisor) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// supervise waits for p to exit and, if p was still the current process,
// restarts the plugin.
func (s *Supervisor) supervise(p *proc) {
	defer s.wg.Done()
	select {
	case <-p.done:
	case <-s.stop.Done():
		return
	}
	s.mu.Lock()
	if s.closed || s.cur != p {
		s.mu.Unlock()
		return
	}
	s.cur = nil
	uptime := time.Since(p.started)
	cause := fmt.Errorf("plugin process %d exited after %s", p.pid, uptime.Round(time.Millisecond))
	s.lastErr = cause
	if uptime >= stableAfter {
		s.attempt = 0
	}
	s.notifyLocked()
	s.mu.Unlock()
	p.kill() // reaps go-plugin's goroutines and socket directory
	s.log.Warn("plugin process exited", "pid", p.pid, "uptime", uptime)
	s.restart(cause)
}

// restart starts new processes with backoff until one is ready, Close is
// called, or a Reload installs one.
func (s *Supervisor) restart(cause error) {
	for {
		s.mu.Lock()
		s.attempt++
		attempt := s.attempt
		s.mu.Unlock()
		wait := s.cfg.Backoff(attempt)
		s.log.Warn("restarting plugin", "attempt", attempt, "backoff", wait, "cause", cause)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.stop.Done():
			t.Stop()
			return
		}
		s.mu.Lock()
		busy := s.cur != nil || s.closed
		s.mu.Unlock()
		if busy {
			return
		}
		p, err := s.spawn(s.stop, s.current())
		if err != nil {
			cause = err
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			s.log.Error("restarting plugin failed", "attempt", attempt, "error", err)
			continue
		}
		if _, ok := s.install(p, false, nil); !ok {
			p.kill()
			return
		}
		s.log.Info("plugin restarted", "attempt", attempt, "pid", p.pid, "version", p.info.Version)
		return
	}
}

// ReloadConfig is what a Reload may change: the pin and the configuration.
// The plugin's name and path stay those Open was given.
type ReloadConfig struct {
	// SHA256 pins the new binary, and every later start, as Config.SHA256
	// does; empty means no pin.
	SHA256 string
	// Configure is sent to the new process and after every later restart,
	// as Config.Configure is; nil means the plugin is not configured.
	Configure *pluginapi.ConfigureRequest
}

// Reload starts the binary now at the plugin's path, checks it against
// rc's pin and configures it with rc's request, and switches new calls to
// it; calls in flight on the old process may finish (for up to
// Config.CallWait) before it is killed. From then on every restart uses rc.
// On failure the old process keeps serving with its pin and configuration,
// and Reload returns the *Error, "plugin <name> (<path>): reloading:
// <cause>". Instances the old process launched are untouched: plugins are
// stateless, the new process finds them in the cloud.
//
// Reload logs the swap (old and new pid, version and sha256); a failure is
// the caller's to log.
func (s *Supervisor) Reload(ctx context.Context, rc ReloadConfig) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.isClosed() {
		return s.wrap(ErrClosed)
	}
	pin, err := parsePin(rc.SHA256)
	if err != nil {
		return s.wrap(fmt.Errorf("reloading: %w", err))
	}
	st := start{pin: pin, configure: rc.Configure}
	p, err := s.spawn(ctx, st)
	if err != nil {
		return s.wrap(fmt.Errorf("reloading: %w", err))
	}
	s.mu.Lock()
	oldInfo, oldSHA := s.info, s.sha
	s.mu.Unlock()
	old, ok := s.install(p, true, &st)
	if !ok {
		p.kill()
		return s.wrap(ErrClosed)
	}
	attrs := []any{"path", s.path, "pid", p.pid, "version", p.info.Version, "sha256", p.sha,
		"old_version", oldInfo.Version, "old_sha256", oldSHA}
	if old != nil {
		attrs = append(attrs, "old_pid", old.pid)
	}
	s.log.Info("plugin reloaded", attrs...)
	if old != nil {
		old.retire()
		drained := make(chan struct{})
		go func() {
			old.inflight.Wait()
			close(drained)
		}()
		t := time.NewTimer(s.cfg.CallWait)
		select {
		case <-drained:
		case <-t.C:
			s.log.Warn("calls on the old plugin process did not finish; killing it", "old_pid", old.pid, "waited", s.cfg.CallWait)
		}
		t.Stop()
		old.kill()
	}
	return nil
}

// Run blocks until ctx ends, then closes the Supervisor. It does not
// reload on SIGHUP: the caller, who knows where the configuration comes
// from, calls Reload.
func (s *Supervisor) Run(ctx context.Context) error {
	<-ctx.Done()
	return s.Close()
}

// Client returns a Client that routes each call to the current plugin
// process, waits (up to Config.CallWait and the call's ctx) while the
// plugin restarts, and retries a call cut short by a lost process. A
// successful Configure through it also becomes the configuration sent
// after every restart.
func (s *Supervisor) Client() pluginapi.Client { return s.client }

// Info returns the GetInfo answer of the current (or last) plugin process.
func (s *Supervisor) Info() *pluginapi.GetInfoResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Path returns the plugin binary's path.
func (s *Supervisor) Path() string { return s.path }

// SHA256 returns the hex SHA-256 of the binary the current (or last)
// plugin process was started from.
func (s *Supervisor) SHA256() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sha
}

// Pid returns the current plugin process ID, or 0 while it restarts.
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.pid
}

func (s *Supervisor) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close kills the plugin process and stops supervising; calls fail with
// ErrClosed. It is idempotent and always returns nil.
func (s *Supervisor) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		p := s.cur
		s.cur = nil
		s.notifyLocked()
		s.mu.Unlock()
		s.cancelStop()
		if p != nil {
			p.kill()
		}
		s.wg.Wait()
		os.RemoveAll(s.sockDir)
		s.log.Info("plugin stopped")
	})
	return nil
}
