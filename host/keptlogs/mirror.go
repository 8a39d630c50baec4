package keptlogs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of MirrorConfig.
const (
	// DefaultRetry is how long a mirror waits after a failed round.
	DefaultRetry = 2 * time.Second
	// DefaultUnadvertisedGrace is how long the Lease's holder may
	// advertise nothing before a standby counts its first copy as made,
	// of nothing: a leader of a kip release without mirroring (an
	// upgrade) or without an admin server would otherwise keep every
	// new replica unready, and a rolling update waiting forever.
	DefaultUnadvertisedGrace = time.Minute
)

const (
	// tempPrefix starts the name of a file the mirror is fetching; a
	// round removes any it finds (a mirror stopped mid-copy).
	tempPrefix = ".mirror-"
	// maxListingBytes bounds a listing's body.
	maxListingBytes = 32 << 20
	// listTimeout bounds a listing's request, its long poll included;
	// fetchTimeout a file's.
	listTimeout  = DefaultWait + 30*time.Second
	fetchTimeout = 5 * time.Minute
)

// MirrorConfig configures NewMirror.
type MirrorConfig struct {
	// Dir is this process's cells.podLogsDir, which the mirror makes a
	// copy of the leader's: it adds, replaces and removes names of the
	// layout (ValidPodDir, ValidFile) and leaves any other alone.
	Dir string
	// MaxTotalBytes (cells.podLogsMaxTotalBytes) bounds what the mirror
	// takes: past it, the oldest files of a listing are left out, and no
	// file may be larger. Zero: no bound.
	MaxTotalBytes int64
	// Leader says where the leader serves its kept logs (Leader, on the
	// Node), or an error wrapping ErrNotAdvertised.
	Leader func(context.Context) (Advertisement, error)
	// Token is the bearer token the mirror presents, read again for each
	// request (a projected ServiceAccount token rotates).
	Token func() (string, error)
	// Client makes the requests; nil is a client of its own.
	Client *http.Client
	// Retry and UnadvertisedGrace: zero means DefaultRetry and
	// DefaultUnadvertisedGrace.
	Retry, UnadvertisedGrace time.Duration
	Log                      *slog.Logger
}

// Mirror keeps a standby's copy of the leader's kept logs (see the
// package documentation). Run it while standing by; Check is its
// readiness.
type Mirror struct {
	cfg    MirrorConfig
	client *http.Client

	synced atomic.Bool
	mu     sync.Mutex
	// lastErr is why the last round failed; refused how many files of
	// the last listing were left out (logged when it changes).
	lastErr error
	refused int
}

// NewMirror builds the mirror cfg describes; Run starts it.
func NewMirror(cfg MirrorConfig) *Mirror {
	cfg.Retry = cmp.Or(cfg.Retry, DefaultRetry)
	cfg.UnadvertisedGrace = cmp.Or(cfg.UnadvertisedGrace, DefaultUnadvertisedGrace)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	return &Mirror{cfg: cfg, client: client}
}

// Synced reports whether a first copy was made (or the leader advertised
// nothing for UnadvertisedGrace).
func (m *Mirror) Synced() bool { return m.synced.Load() }

// Check is the mirror's readiness: it passes once Synced, so that a
// rolling update takes an old leader away only once a new replica holds
// a copy of its kept logs.
func (m *Mirror) Check(*http.Request) error {
	if m.Synced() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != nil {
		return fmt.Errorf("no copy of the leader's kept logs yet: %w", m.lastErr)
	}
	return errors.New("no copy of the leader's kept logs yet: copying")
}

// Run mirrors until ctx ends, then returns nil: it asks where the leader
// is, lists its kept logs (a long poll once it has a copy, so that a log
// the leader keeps reaches the standby within about DefaultRescan),
// fetches what it lacks or what changed and removes what the leader no
// longer has; after a failure it tries again every Retry. It returns
// only once it has stopped writing to Dir.
func (m *Mirror) Run(ctx context.Context) error {
	var st followed
	for ctx.Err() == nil {
		err := m.step(ctx, &st)
		if err == nil || ctx.Err() != nil {
			continue
		}
		m.failed(err)
		select {
		case <-ctx.Done():
		case <-time.After(m.cfg.Retry):
		}
	}
	return nil
}

// followed is what Run remembers between steps: the leader's URL, the
// generation of its listing last copied, and since when the leader
// advertises nothing.
type followed struct {
	base, generation  string
	unadvertisedSince time.Time
}

// step finds the leader and makes one round of copying from it.
func (m *Mirror) step(ctx context.Context, st *followed) error {
	adv, err := m.cfg.Leader(ctx)
	if errors.Is(err, ErrNotAdvertised) {
		if st.unadvertisedSince.IsZero() {
			st.unadvertisedSince = time.Now()
		} else if time.Since(st.unadvertisedSince) >= m.cfg.UnadvertisedGrace && !m.synced.Load() {
			m.synced.Store(true)
			m.cfg.Log.Warn("the leader advertises no kept logs: ready without a copy of them", "waited", m.cfg.UnadvertisedGrace, "error", err)
		}
	}
	if err != nil {
		return err
	}
	st.unadvertisedSince = time.Time{}
	if adv.URL != st.base {
		st.base, st.generation = adv.URL, ""
	}
	if st.generation, err = m.round(ctx, st.base, st.generation); err != nil {
		return err
	}
	m.done(adv)
	return nil
}

func (m *Mirror) done(adv Advertisement) {
	if !m.synced.Swap(true) {
		m.cfg.Log.Info("made a copy of the leader's kept logs", "leader", adv.Identity, "url", adv.URL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr != nil {
		m.cfg.Log.Info("copying the leader's kept logs again", "leader", adv.Identity)
	}
	m.lastErr = nil
}

// failed keeps err for Check and logs it when it differs from the last.
func (m *Mirror) failed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr == nil || m.lastErr.Error() != err.Error() {
		m.cfg.Log.Warn("copying the leader's kept logs", "error", err)
	}
	m.lastErr = err
}

// round makes Dir a copy of the listing at base (waiting for one newer
// than generation, if given) and returns the listing's generation.
func (m *Mirror) round(ctx context.Context, base, generation string) (string, error) {
	l, err := m.list(ctx, base, generation)
	if err != nil {
		return "", err
	}
	want := m.admit(l)
	if err := os.MkdirAll(m.cfg.Dir, 0o700); err != nil {
		return "", fmt.Errorf("copying the leader's kept logs: %w", err)
	}
	if err := m.removeOthers(want); err != nil {
		return "", err
	}
	var errs []error
	for _, pod := range sortedKeys(want) {
		dir := filepath.Join(m.cfg.Dir, pod)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, fmt.Errorf("copying the leader's kept logs of %s: %w", pod, err))
			continue
		}
		for _, name := range sortedKeys(want[pod]) {
			f := want[pod][name]
			if upToDate(filepath.Join(dir, name), f) {
				continue
			}
			if err := m.fetch(ctx, base, pod, f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return l.Generation, errors.Join(errs...)
}

// list asks base for its listing.
func (m *Mirror) list(ctx context.Context, base, generation string) (Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	u := strings.TrimSuffix(base, "/") + Path
	if generation != "" {
		u += "?wait=" + url.QueryEscape(generation)
	}
	resp, err := m.get(ctx, u)
	if err != nil {
		return Listing{}, err
	}
	defer resp.Body.Close()
	var l Listing
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxListingBytes)).Decode(&l); err != nil {
		return Listing{}, fmt.Errorf("reading the leader's listing of its kept logs at %s: %w", u, err)
	}
	return l, nil
}

// admit is what the mirror takes of l, by pod directory and file name:
// names of the layout only, and, newest first, as many bytes as
// MaxTotalBytes allows.
func (m *Mirror) admit(l Listing) map[string]map[string]File {
	type entry struct {
		pod string
		f   File
	}
	want := map[string]map[string]File{}
	var all []entry
	var badNames []string
	for _, p := range l.Pods {
		if !ValidPodDir(p.Name) {
			badNames = append(badNames, p.Name)
			continue
		}
		want[p.Name] = map[string]File{}
		for _, f := range p.Files {
			if !ValidFile(f.Name) || f.Size < 0 {
				badNames = append(badNames, p.Name+"/"+f.Name)
				continue
			}
			all = append(all, entry{p.Name, f})
		}
	}
	slices.SortStableFunc(all, func(a, b entry) int { return b.f.ModTime.Compare(a.f.ModTime) })
	var total int64
	over := 0
	for _, e := range all {
		if m.cfg.MaxTotalBytes > 0 && (e.f.Size > m.cfg.MaxTotalBytes-total) {
			over++
			continue
		}
		total += e.f.Size
		want[e.pod][e.f.Name] = e.f
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if refused := len(badNames) + over; refused != m.refused {
		m.refused = refused
		if len(badNames) > 0 {
			m.cfg.Log.Warn("the leader lists kept logs under names outside the layout <namespace>_<name>_<uid>/<container>.log: not copied", "names", badNames)
		}
		if over > 0 {
			m.cfg.Log.Warn("the leader's kept logs are over cells.podLogsMaxTotalBytes: the oldest are not copied", "files", over, "max_total_bytes", m.cfg.MaxTotalBytes)
		}
	}
	return want
}

// removeOthers removes from Dir the pod directories and logs that want
// does not hold, and files a stopped fetch left.
func (m *Mirror) removeOthers(want map[string]map[string]File) error {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("copying the leader's kept logs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !ValidPodDir(e.Name()) {
			continue
		}
		dir := filepath.Join(m.cfg.Dir, e.Name())
		files, ok := want[e.Name()]
		if !ok {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("removing the kept logs the leader no longer has: %w", err))
			}
			continue
		}
		local, _ := os.ReadDir(dir)
		for _, f := range local {
			_, wanted := files[f.Name()]
			if ValidFile(f.Name()) && !wanted || strings.HasPrefix(f.Name(), tempPrefix) {
				if err := os.Remove(filepath.Join(dir, f.Name())); err != nil {
					errs = append(errs, fmt.Errorf("removing the kept logs the leader no longer has: %w", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// fetch copies one file from base into Dir, through a temporary file
// renamed over the old, with the leader's mtime (prune orders by it).
func (m *Mirror) fetch(ctx context.Context, base, pod string, f File) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	// Names of the layout need no escaping.
	resp, err := m.get(ctx, strings.TrimSuffix(base, "/")+Path+"/"+pod+"/"+f.Name)
	if errors.Is(err, errGone) {
		return nil // removed since the listing: the next round agrees
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	limit := m.cfg.MaxTotalBytes
	if limit <= 0 {
		limit = math.MaxInt64 - 1
	}
	dir := filepath.Join(m.cfg.Dir, pod)
	tmp, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("copying the kept log %s/%s: %w", pod, f.Name, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying the kept log %s/%s: %w", pod, f.Name, err)
	}
	if n > limit {
		return fmt.Errorf("copying the kept log %s/%s: over cells.podLogsMaxTotalBytes (%d bytes): not copied", pod, f.Name, limit)
	}
	if err := os.Chtimes(tmp.Name(), f.ModTime, f.ModTime); err != nil {
		return fmt.Errorf("copying the kept log %s/%s: %w", pod, f.Name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, f.Name)); err != nil {
		return fmt.Errorf("copying the kept log %s/%s: %w", pod, f.Name, err)
	}
	return nil
}

// errGone is get's error for a 404.
var errGone = errors.New("not found")

// get GETs u with the bearer token; an answer other than 200 is an error
// saying what it means.
func (m *Mirror) get(ctx context.Context, u string) (*http.Response, error) {
	token, err := m.cfg.Token()
	if err != nil {
		return nil, fmt.Errorf("reading the token to ask the leader for its kept logs: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("asking the leader for its kept logs: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the leader for its kept logs: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	why := ""
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %w", u, errGone)
	case http.StatusUnauthorized:
		why = " (the leader's API server does not accept this process's token: keptLogs.tokenFile)"
	case http.StatusForbidden:
		why = " (this process's identity may not get " + Path + ": deploy/rbac/kip-kept-logs.yaml grants it to the ServiceAccount kip-system/kip)"
	}
	return nil, fmt.Errorf("asking the leader for its kept logs: GET %s: %s%s: %.200q", u, resp.Status, why, body)
}

// upToDate reports whether path holds f as listed: the same size and
// mtime (to the millisecond, whatever the file system keeps).
func upToDate(path string, f File) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return false
	}
	d := fi.ModTime().Sub(f.ModTime)
	return d < time.Millisecond && d > -time.Millisecond
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
