package keptlogs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/host/setting"
)

var quiet = slog.New(slog.DiscardHandler)

func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pod, file bool
	}{
		{name: "default_web-0_0f6c4d2e-8d7a-4c4e-9e0e-1b2c3d4e5f60", pod: true},
		{name: "ns_job.x-1_uid-1", pod: true},
		{name: "c.log", file: true},
		{name: "main-2.log", file: true},
		{name: "ns_pod"},
		{name: "ns_pod_uid_more"},
		{name: "../ns_pod_uid"},
		{name: "ns_.._uid"},
		{name: "ns_pod_../uid"},
		{name: "NS_pod_uid"},
		{name: "ns_pod_uid/c.log"},
		{name: "../c.log"},
		{name: "c.log.12345"},
		{name: "c.log.12345.newest"},
		{name: ".mirror-123"},
		{name: ".log"},
		{name: "C.log"},
		{name: ""},
	} {
		if got := ValidPodDir(tc.name); got != tc.pod {
			t.Errorf("ValidPodDir(%q) = %v, want %v", tc.name, got, tc.pod)
		}
		if got := ValidFile(tc.name); got != tc.file {
			t.Errorf("ValidFile(%q) = %v, want %v", tc.name, got, tc.file)
		}
	}
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)

// keep writes a kept log under dir with mtime.
func keep(t *testing.T, dir, pod, file, content string, mtime time.Time) {
	t.Helper()
	path := filepath.Join(dir, pod, file)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// tree is dir's files with their content and mtime, by relative path.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(data) + " @" + fi.ModTime().UTC().Format(time.RFC3339Nano)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServerListsAndServes(t *testing.T) {
	dir := t.TempDir()
	keep(t, dir, "ns_a_u1", "c.log", "hello\n", t0)
	keep(t, dir, "ns_a_u1", "c.log.4242", "half-written", t0)
	keep(t, dir, "ns_b_u2", "d.log", "world\n", t0.Add(time.Second))
	keep(t, dir, "not-a-pod", "c.log", "other\n", t0)
	ts := httptest.NewServer(&Server{Dir: dir, Log: quiet})
	t.Cleanup(ts.Close)

	l, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Pod{
		{Name: "ns_a_u1", Files: []File{{Name: "c.log", Size: 6, ModTime: t0}}},
		{Name: "ns_b_u2", Files: []File{{Name: "d.log", Size: 6, ModTime: t0.Add(time.Second)}}},
	}
	if diff := cmp.Diff(want, l.Pods); diff != "" {
		t.Errorf("Scan (-want +got):\n%s", diff)
	}
	resp, err := http.Get(ts.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	var served Listing
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff(l, served); diff != "" {
		t.Errorf("GET %s (-Scan +served):\n%s", Path, diff)
	}

	for _, tc := range []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{path: Path + "/ns_a_u1/c.log", wantCode: 200, wantBody: "hello\n"},
		{path: Path + "/ns_b_u2/d.log", wantCode: 200, wantBody: "world\n"},
		{path: Path + "/ns_a_u1/c.log.4242", wantCode: 404},
		{path: Path + "/not-a-pod/c.log", wantCode: 404},
		{path: Path + "/ns_a_u1/missing.log", wantCode: 404},
		{path: Path + "/ns_a_u1/..%2f..%2fns_b_u2%2fd.log", wantCode: 404},
		{path: Path + "/ns_a_u1", wantCode: 404},
	} {
		resp, err := http.Get(ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantCode || tc.wantBody != "" && string(body) != tc.wantBody {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.wantCode, tc.wantBody)
		}
	}
}

// TestServerLongPoll: a listing asked with ?wait=<its generation> answers
// once a log is kept, with it.
func TestServerLongPoll(t *testing.T) {
	dir := t.TempDir()
	keep(t, dir, "ns_a_u1", "c.log", "hello\n", t0)
	ts := httptest.NewServer(&Server{Dir: dir, Wait: time.Hour, Rescan: 5 * time.Millisecond, Log: quiet})
	t.Cleanup(ts.Close)
	before, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Listing, 1)
	go func() {
		var l Listing
		resp, err := http.Get(ts.URL + Path + "?wait=" + before.Generation)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
		}
		got <- l
	}()
	keep(t, dir, "ns_b_u2", "d.log", "new\n", t0)
	l := <-got
	if l.Generation == before.Generation || len(l.Pods) != 2 {
		t.Errorf("the long poll answered %+v, want the listing with ns_b_u2", l)
	}
}

// TestServerLongPollWakesOnChanges: with Changes, a waiting listing
// answers at the notification that a log was kept, not at a rescan (an
// hour here).
func TestServerLongPollWakesOnChanges(t *testing.T) {
	dir := t.TempDir()
	keep(t, dir, "ns_a_u1", "c.log", "hello\n", t0)
	changes := NewChanges()
	scanned := make(chan struct{}, 1)
	ts := httptest.NewServer(&Server{Dir: dir, Wait: 40 * time.Second, Rescan: time.Hour, Changes: changes, Log: quiet,
		scanned: func() { scanned <- struct{}{} }})
	t.Cleanup(ts.Close)
	before, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Listing, 1)
	go func() {
		var l Listing
		resp, err := http.Get(ts.URL + Path + "?wait=" + before.Generation)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
		}
		got <- l
	}()
	<-scanned // the listing is the old one: the request waits
	keep(t, dir, "ns_b_u2", "d.log", "new\n", t0)
	changes.Notify()
	select {
	case l := <-got:
		if l.Generation == before.Generation || len(l.Pods) != 2 {
			t.Errorf("the long poll answered %+v, want the listing with ns_b_u2", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not answer the notification")
	}
}

// leader is a fake leader: a Server of dir behind a bearer token, or
// listing, when set, instead of the directory's.
type leader struct {
	dir, token string
	listing    *Listing
	mu         sync.Mutex
	asked      []string
}

func (l *leader) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := &Server{Dir: l.dir, Log: quiet}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.asked = append(l.asked, r.URL.Path)
		l.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+l.token {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		if l.listing != nil && r.URL.Path == Path {
			_ = json.NewEncoder(w).Encode(l.listing)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func newTestMirror(dir, url string, maxTotal int64) *Mirror {
	return NewMirror(MirrorConfig{Dir: dir, MaxTotalBytes: maxTotal, Log: quiet,
		Leader: func(context.Context) (Advertisement, error) { return Advertisement{Identity: "kip-a", URL: url}, nil },
		Token:  func() (string, error) { return "sa-token", nil }})
}

// TestMirrorRound: each round makes the standby's directory the leader's:
// new logs copied with their mtime, changed ones copied again, removed
// ones gone, files of other names left alone.
func TestMirrorRound(t *testing.T) {
	leaderDir, standbyDir := t.TempDir(), t.TempDir()
	ts := (&leader{dir: leaderDir, token: "sa-token"}).start(t)
	m := newTestMirror(standbyDir, ts.URL, 1<<20)
	keep(t, standbyDir, "ns_old_u0", "c.log", "gone on the leader\n", t0)
	keep(t, standbyDir, "ns_a_u1", tempPrefix+"77", "a stopped copy", t0)
	keep(t, standbyDir, "lost+found", "x", "not a kept log", t0)
	at := t0.Format(time.RFC3339Nano)

	for _, step := range []struct {
		name   string
		change func()
		want   map[string]string
	}{
		{
			name: "first copy",
			change: func() {
				keep(t, leaderDir, "ns_a_u1", "c.log", "one\n", t0)
				keep(t, leaderDir, "ns_a_u1", "d.log", "two\n", t0)
				keep(t, leaderDir, "ns_b_u2", "c.log", "three\n", t0)
				keep(t, leaderDir, "ns_b_u2", "c.log.999", "being written", t0)
			},
			want: map[string]string{
				"ns_a_u1/c.log": "one\n @" + at, "ns_a_u1/d.log": "two\n @" + at, "ns_b_u2/c.log": "three\n @" + at,
				"lost+found/x": "not a kept log @" + at,
			},
		},
		{
			name: "changed on the leader, same size",
			change: func() {
				keep(t, leaderDir, "ns_a_u1", "c.log", "ONE\n", t0.Add(time.Minute))
			},
			want: map[string]string{
				"ns_a_u1/c.log": "ONE\n @" + t0.Add(time.Minute).Format(time.RFC3339Nano), "ns_a_u1/d.log": "two\n @" + at, "ns_b_u2/c.log": "three\n @" + at,
				"lost+found/x": "not a kept log @" + at,
			},
		},
		{
			name: "a log and a pod removed on the leader",
			change: func() {
				if err := os.Remove(filepath.Join(leaderDir, "ns_a_u1", "d.log")); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(leaderDir, "ns_b_u2")); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{
				"ns_a_u1/c.log": "ONE\n @" + t0.Add(time.Minute).Format(time.RFC3339Nano),
				"lost+found/x":  "not a kept log @" + at,
			},
		},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			if _, err := m.round(t.Context(), ts.URL, ""); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(step.want, tree(t, standbyDir)); diff != "" {
				t.Errorf("the standby's kept logs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMirrorRoundRefuses: names outside the layout (a path out of the
// directory) and what exceeds MaxTotalBytes are not copied.
func TestMirrorRoundRefuses(t *testing.T) {
	leaderDir, standbyDir := t.TempDir(), t.TempDir()
	keep(t, leaderDir, "ns_a_u1", "c.log", "0123456789", t0)
	keep(t, leaderDir, "ns_b_u2", "c.log", "0123456789", t0.Add(time.Second))
	keep(t, leaderDir, "ns_c_u3", "c.log", "01234", t0.Add(2*time.Second))
	l, err := Scan(leaderDir)
	if err != nil {
		t.Fatal(err)
	}
	l.Pods = append(l.Pods,
		// Newest: the bound would take them.
		Pod{Name: "..", Files: []File{{Name: "c.log", Size: 1, ModTime: t0.Add(time.Hour)}}},
		Pod{Name: "ns_a_u1", Files: []File{{Name: "../../escaped.log", Size: 1, ModTime: t0.Add(time.Hour)}}},
		Pod{Name: "../../ns_x_u9", Files: []File{{Name: "c.log", Size: 1, ModTime: t0.Add(time.Hour)}}},
	)
	fake := &leader{dir: leaderDir, token: "sa-token", listing: &l}
	ts := fake.start(t)
	// 15 bytes: the two newest fit, the oldest does not.
	m := newTestMirror(filepath.Join(standbyDir, "pod-logs"), ts.URL, 15)
	if _, err := m.round(t.Context(), ts.URL, ""); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) string { return " @" + t0.Add(d).Format(time.RFC3339Nano) }
	want := map[string]string{"pod-logs/ns_b_u2/c.log": "0123456789" + at(time.Second), "pod-logs/ns_c_u3/c.log": "01234" + at(2*time.Second)}
	if diff := cmp.Diff(want, tree(t, standbyDir)); diff != "" {
		t.Errorf("the standby's directory (-want +got):\n%s", diff)
	}
	for _, p := range fake.asked {
		if strings.Contains(p, "..") || strings.Contains(p, "escaped") {
			t.Errorf("the mirror asked for %s", p)
		}
	}

	// A file served larger than it was listed, beyond the bound.
	keep(t, leaderDir, "ns_c_u3", "c.log", strings.Repeat("x", 16), t0.Add(2*time.Second))
	l.Pods[2].Files[0].Size = 5
	l.Generation = "changed"
	m.cfg.Dir = filepath.Join(standbyDir, "pod-logs")
	if err := os.Remove(filepath.Join(m.cfg.Dir, "ns_c_u3", "c.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.round(t.Context(), ts.URL, ""); err == nil || !strings.Contains(err.Error(), "over cells.podLogsMaxTotalBytes") {
		t.Errorf("round with a file over the bound = %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(m.cfg.Dir, "ns_c_u3", "c.log")); err == nil {
		t.Errorf("the file over the bound was kept")
	}
}

func TestMirrorRoundForbidden(t *testing.T) {
	ts := (&leader{dir: t.TempDir(), token: "another"}).start(t)
	m := newTestMirror(t.TempDir(), ts.URL, 0)
	_, err := m.round(t.Context(), ts.URL, "")
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "deploy/rbac/kip-kept-logs.yaml") {
		t.Errorf("round refused by the leader = %v, want the 403 naming the grant", err)
	}
}

// waitUntil polls cond (no timing assertion: a bound against hangs).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// TestMirrorRunIsReadyOnceCopied: the standby is not ready until its
// first copy, then follows the leader (a log kept later reaches it
// through the long poll), and Run returns once its context ends.
func TestMirrorRunIsReadyOnceCopied(t *testing.T) {
	leaderDir, standbyDir := t.TempDir(), t.TempDir()
	keep(t, leaderDir, "ns_a_u1", "c.log", "one\n", t0)
	srv := &Server{Dir: leaderDir, Wait: time.Hour, Rescan: 5 * time.Millisecond, Log: quiet}
	var allow sync.Mutex
	allow.Lock() // the leader answers nothing until unlocked
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow.Lock()
		allow.Unlock() //nolint:staticcheck // a gate, not a critical section
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m := newTestMirror(standbyDir, ts.URL, 0)
	if err := m.Check(nil); err == nil {
		t.Fatal("ready before any copy")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	if err := m.Check(nil); err == nil {
		t.Fatal("ready before the leader answered")
	}
	allow.Unlock()
	waitUntil(t, "the first copy", m.Synced)
	if err := m.Check(nil); err != nil {
		t.Errorf("Check after the first copy = %v", err)
	}
	if _, err := os.Stat(filepath.Join(standbyDir, "ns_a_u1", "c.log")); err != nil {
		t.Errorf("ready without the copy: %v", err)
	}
	keep(t, leaderDir, "ns_b_u2", "c.log", "later\n", t0)
	waitUntil(t, "the log kept later", func() bool {
		_, err := os.Stat(filepath.Join(standbyDir, "ns_b_u2", "c.log"))
		return err == nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestMirrorRunWithoutAdvertisement: a leader that advertises nothing
// (an older kip) keeps the standby unready only for UnadvertisedGrace.
func TestMirrorRunWithoutAdvertisement(t *testing.T) {
	m := NewMirror(MirrorConfig{Dir: t.TempDir(), Log: quiet, Retry: time.Millisecond, UnadvertisedGrace: 10 * time.Millisecond,
		Leader: func(context.Context) (Advertisement, error) { return Advertisement{}, ErrNotAdvertised },
		Token:  func() (string, error) { return "t", nil }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = m.Run(ctx) }()
	if err := m.Check(nil); err == nil || m.Synced() {
		t.Fatal("ready before the grace")
	}
	waitUntil(t, "the grace to end", m.Synced)
}

type nodes map[string]*corev1.Node

func (n nodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	if node, ok := n[name]; ok {
		return node, nil
	}
	return nil, errors.New("not found")
}

func TestLeader(t *testing.T) {
	node := func(annotation string) nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kip"}}
		if annotation != "" {
			n.Annotations = map[string]string{Annotation: annotation}
		}
		return nodes{"kip": n}
	}
	good := Advertisement{Identity: "kip-a", URL: "http://10.0.0.1:10262"}
	for _, tc := range []struct {
		name           string
		nodes          nodes
		holder         string
		want           Advertisement
		notAdvertised  bool
		wantErrContain string
	}{
		{name: "advertised by the holder", nodes: node(good.Encode()), holder: "kip-a", want: good},
		{name: "an old leader's", nodes: node(good.Encode()), holder: "kip-b", notAdvertised: true, wantErrContain: `"kip-a"'s`},
		{name: "no holder seen yet", nodes: node(good.Encode()), holder: "", notAdvertised: true},
		{name: "none", nodes: node(""), holder: "kip-a", notAdvertised: true, wantErrContain: "no annotation"},
		{name: "not JSON", nodes: node("http://x"), holder: "kip-a", notAdvertised: true},
		{name: "no node", nodes: nodes{}, holder: "kip-a", wantErrContain: "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Leader(t.Context(), tc.nodes, "kip", func() string { return tc.holder })
			if errors.Is(err, ErrNotAdvertised) != tc.notAdvertised || (err == nil) != (tc.wantErrContain == "" && !tc.notAdvertised) ||
				err != nil && !strings.Contains(err.Error(), tc.wantErrContain) {
				t.Fatalf("Leader = %v, want not advertised %v, containing %q", err, tc.notAdvertised, tc.wantErrContain)
			}
			if got != tc.want {
				t.Errorf("Leader = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		wantKeys []string
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "a URL", cfg: Config{AdvertiseURL: "http://10.0.0.1:10262"}},
		{name: "https with a slash", cfg: Config{AdvertiseURL: "https://kip.example:10262/"}},
		{name: "no scheme", cfg: Config{AdvertiseURL: "10.0.0.1:10262"}, wantKeys: []string{"advertiseURL"}},
		{name: "a path", cfg: Config{AdvertiseURL: "http://10.0.0.1:10262/keptlogs"}, wantKeys: []string{"advertiseURL"}},
		{name: "spaces", cfg: Config{TokenFile: " /token"}, wantKeys: []string{"tokenFile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantKeys, setting.Keys(tc.cfg.Validate())); diff != "" {
				t.Errorf("keys of Validate's errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFileToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tok := FileToken(path)
	if _, err := tok(); err == nil {
		t.Error("a token from no file")
	}
	for _, v := range []string{"first\n", "rotated"} {
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := tok(); err != nil || got != strings.TrimSpace(v) {
			t.Errorf("token = %q, %v; want %q", got, err, strings.TrimSpace(v))
		}
	}
}
