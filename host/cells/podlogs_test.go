package cells

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/cell/api/logs"
)

func TestToCRI(t *testing.T) {
	in := "2026-11-24T10:00:00.000000001Z first line\n2026-11-24T10:00:01Z second  line\n2026-11-24T10:00:02Z no newline"
	var out bytes.Buffer
	if err := toCRI(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := "2026-11-24T10:00:00.000000001Z stdout F first line\n2026-11-24T10:00:01Z stdout F second  line\n2026-11-24T10:00:02Z stdout P no newline\n"
	if out.String() != want {
		t.Errorf("toCRI =\n%q\nwant\n%q", out.String(), want)
	}
	if err := toCRI(strings.NewReader("no timestamp here\n"), &out); err == nil {
		t.Error("a line without a timestamp was taken")
	}
}

// TestToCRIOfLongLines: a line longer than a log record is kept as
// partial records of bounded size under the line's time, whose contents
// make the line again; with or without a final newline.
func TestToCRIOfLongLines(t *testing.T) {
	const ts = "2026-11-24T10:00:00.5Z"
	for _, tt := range []struct {
		name, line string
		newline    bool
	}{
		{"three records and a newline", strings.Repeat("x", 2*logs.MaxLineSize+100), true},
		{"exactly a record's size", strings.Repeat("y", logs.MaxLineSize), true},
		{"no newline", strings.Repeat("z", 3*logs.MaxLineSize+7), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := ts + " " + tt.line
			if tt.newline {
				in += "\n"
			}
			var out bytes.Buffer
			if err := toCRI(strings.NewReader(in+ts+" after\n"), &out); err != nil {
				t.Fatal(err)
			}
			var line strings.Builder
			var lines []string
			for rec := range strings.Lines(out.String()) {
				if len(rec) > logs.MaxLineSize+128 {
					t.Fatalf("a record of %d bytes: toCRI holds whole lines", len(rec))
				}
				e, err := logs.ParseLine([]byte(strings.TrimSuffix(rec, "\n")))
				if err != nil {
					t.Fatal(err)
				}
				if got := e.Time.Format(time.RFC3339Nano); got != ts {
					t.Errorf("record time %s, want the line's %s", got, ts)
				}
				line.Write(e.Content)
				if !e.Partial {
					lines = append(lines, line.String())
					line.Reset()
				}
			}
			want := []string{tt.line, "after"}
			if !tt.newline {
				want = []string{tt.line + ts + " after"} // the next "line" goes on the unfinished one
			}
			if !slices.Equal(lines, want) || line.Len() != 0 {
				t.Errorf("lines of %d, %d bytes (left %d); want %d, %d", len(lines[0]), len(lines)-1, line.Len(), len(want[0]), len(want)-1)
			}
		})
	}
}

// TestWriteNewestOfOneLongLine: a log that is one line longer than what
// is kept (a container that printed megabytes without a newline) keeps
// the line's newest part, not nothing.
func TestWriteNewestOfOneLongLine(t *testing.T) {
	long := strings.Repeat("0123456789", 300<<10) // 3 MB
	in := "2026-11-24T10:00:00Z " + long + "LAST"
	path := filepath.Join(t.TempDir(), "c.log")
	const limit = 1 << 20
	if err := writeNewest(path, strings.NewReader(in), limit); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > limit || fi.Size() < limit-logs.MaxLineSize-128 {
		t.Errorf("kept %d bytes of a 3 MB line, want about %d", fi.Size(), limit)
	}
	var out bytes.Buffer
	if err := logs.NewStore(filepath.Dir(path)).Read(t.Context(), path, logs.Options{TailLines: -1}, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasSuffix(got, "6789LAST") || !strings.HasSuffix(long+"LAST", got) {
		t.Errorf("kept %d bytes ending %q: not the line's tail", len(got), got[max(0, len(got)-20):])
	}
}

// TestWriteNewest: a log over the limit keeps its newest whole lines, in
// CRI form; one under it is kept whole.
func TestWriteNewest(t *testing.T) {
	in := "2026-11-24T10:00:00Z one\n2026-11-24T10:00:01Z two\n2026-11-24T10:00:02Z three\n"
	line := func(ts, s string) string { return "2026-11-24T10:00:0" + ts + "Z stdout F " + s + "\n" }
	for _, tt := range []struct {
		limit int64
		want  string
	}{
		{1 << 20, line("0", "one") + line("1", "two") + line("2", "three")},
		{int64(len(line("1", "two") + line("2", "three"))), line("1", "two") + line("2", "three")},
		{int64(len(line("1", "two")+line("2", "three"))) - 1, line("2", "three")},
	} {
		path := filepath.Join(t.TempDir(), "c.log")
		if err := writeNewest(path, strings.NewReader(in), tt.limit); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tt.want {
			t.Errorf("limit %d: %q, %v; want %q", tt.limit, got, err, tt.want)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "c.log.*")); len(left) != 0 {
			t.Errorf("limit %d: temporary files left: %v", tt.limit, left)
		}
	}
}

// TestPodLogsRead: a kept log is served with kubectl's options; the
// previous run is a bad request in the kubelet's words, an unknown
// container NotFound, each with a reason.
func TestPodLogsRead(t *testing.T) {
	p := podLogs{dir: t.TempDir()}
	dir := p.podDir("ns", "job-x", "uid-1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var log strings.Builder
	for i, line := range []string{"one", "two", "three"} {
		log.WriteString(now.Add(time.Duration(i-3)*time.Minute).Format(time.RFC3339Nano) + " stdout F " + line + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "main.log"), []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts api.ContainerLogOpts
		want string
	}{
		{"all", api.ContainerLogOpts{}, "one\ntwo\nthree\n"},
		{"tail", api.ContainerLogOpts{Tail: 2}, "two\nthree\n"},
		{"since", api.ContainerLogOpts{SinceSeconds: 150}, "two\nthree\n"},
		{"limit", api.ContainerLogOpts{LimitBytes: 5}, "one\nt"},
		{"follow ends at the end", api.ContainerLogOpts{Follow: true, Tail: 1}, "three\n"},
		{"timestamps", api.ContainerLogOpts{Tail: 1, Timestamps: true}, now.Add(-time.Minute).Format(time.RFC3339Nano) + " three\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := p.read(t.Context(), "ns", "job-x", "uid-1", "main", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || string(got) != tt.want {
				t.Errorf("read %+v = %q, %v; want %q", tt.opts, got, err, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		container string
		opts      api.ContainerLogOpts
		want      string
	}{
		{"main", api.ContainerLogOpts{Previous: true}, `previous terminated container "main" in pod "job-x" not found`},
		{"other", api.ContainerLogOpts{}, "no log of container other was kept"},
	} {
		_, err := p.read(t.Context(), "ns", "job-x", "uid-1", tt.container, tt.opts)
		if notFoundOrBad := errdefs.IsNotFound(err) || errdefs.IsInvalidInput(err); !notFoundOrBad || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("read %s %+v: %v, want NotFound or InvalidInput saying %q", tt.container, tt.opts, err, tt.want)
		}
	}
	if err := p.remove("ns", "job-x", "uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the pod's directory is still there after remove: %v", err)
	}
}

func TestPodLogsPrune(t *testing.T) {
	type kept struct {
		ns, name string
		size     int
		age      time.Duration
	}
	for _, tt := range []struct {
		name     string
		maxTotal int64
		kept     []kept
		gone     string // the pod deleted meanwhile
		want     []string
	}{
		{
			name: "one namespace: the deleted pod's, then the oldest", maxTotal: 250,
			kept: []kept{{"ns", "gone", 10, time.Minute}, {"ns", "old", 100, 3 * time.Hour}, {"ns", "mid", 100, 2 * time.Hour}, {"ns", "new", 100, time.Hour}},
			gone: "gone", want: []string{"ns/gone", "ns/old"},
		},
		{
			// The loud namespace's recent logs go before the quiet one's
			// older ones: one tenant cannot evict another's.
			name: "the namespace holding the most loses its own", maxTotal: 300,
			kept: []kept{{"quiet", "q1", 100, 5 * time.Hour}, {"loud", "l1", 100, 3 * time.Hour}, {"loud", "l2", 100, 2 * time.Hour}, {"loud", "l3", 100, time.Hour}},
			want: []string{"loud/l1"},
		},
		{
			name: "equal namespaces: the older log first", maxTotal: 250,
			kept: []kept{{"a", "a1", 100, 2 * time.Hour}, {"b", "b1", 100, 3 * time.Hour}, {"a", "a2", 50, time.Hour}, {"b", "b2", 50, time.Hour}},
			want: []string{"b/b1"},
		},
		{
			name: "under the bound: nothing", maxTotal: 1000,
			kept: []kept{{"a", "a1", 100, time.Hour}, {"b", "b1", 100, time.Hour}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := podLogs{dir: dir, maxTotal: tt.maxTotal}
			paths := map[string]string{}
			for _, k := range tt.kept {
				d := p.podDir(k.ns, k.name, types.UID("uid-"+k.name))
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(d, "main.log")
				if err := os.WriteFile(f, bytes.Repeat([]byte("x"), k.size), 0o600); err != nil {
					t.Fatal(err)
				}
				when := time.Now().Add(-k.age)
				if err := os.Chtimes(f, when, when); err != nil {
					t.Fatal(err)
				}
				paths[d] = k.ns + "/" + k.name
			}
			if err := os.WriteFile(filepath.Join(dir, "stray-file"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			removed, err := p.prune(func(uid types.UID) bool { return uid != types.UID("uid-"+tt.gone) })
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range removed {
				got = append(got, paths[d])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("removed %v, want %v", got, tt.want)
			}
			for d, name := range paths {
				_, err := os.Stat(d)
				if gone := slices.Contains(tt.want, name); gone != errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: removed %v, want %v", name, !gone, gone)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "stray-file")); err != nil {
				t.Errorf("a file that is no pod's logs was removed: %v", err)
			}
		})
	}
}

// TestKeptLogsAfterRestart: a pod that ended before kip restarted has no
// cell in the new run; kubectl logs still reads what was kept.
func TestKeptLogsAfterRestart(t *testing.T) {
	h := newHarness(t)
	pod := newPod("done", "uid-done")
	pod.Status.Phase = "Succeeded"
	if err := h.indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	dir := h.m.deps.logs.podDir(pod.Namespace, pod.Name, pod.UID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.log"), []byte("2026-11-24T10:00:00Z stdout F the result\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := h.m.GetContainerLogs(t.Context(), pod.Namespace, pod.Name, "main", api.ContainerLogOpts{})
	if err != nil {
		t.Fatalf("GetContainerLogs of an ended pod without a cell: %v", err)
	}
	defer r.Close()
	got, _ := io.ReadAll(r)
	if string(got) != "the result\n" {
		t.Errorf("log = %q, want the kept line", got)
	}
}

func TestNothingToKeep(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("keeping the log of container app: %w", grpcstatus.Error(codes.FailedPrecondition, `container "app" has not started yet`)), true},
		{fmt.Errorf("reading logs: %w", grpcstatus.Error(codes.NotFound, "no such container")), true},
		{errdefs.NotFound("gone"), true},
		{fmt.Errorf("reading logs: %w", grpcstatus.Error(codes.Unavailable, "connection reset")), false},
		{errors.New("disk full"), false},
	}
	for _, tt := range tests {
		if got := nothingToKeep(tt.err); got != tt.want {
			t.Errorf("nothingToKeep(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestKeptLogsChangesAreTold: removing a pod's kept logs and pruning
// some tell Config.KeptLogsChanged (the standbys' long polls wake on it);
// a prune that removes nothing does not.
func TestKeptLogsChangesAreTold(t *testing.T) {
	told := 0
	p := podLogs{dir: t.TempDir(), changed: func() { told++ }}
	for _, uid := range []types.UID{"u1", "u2"} {
		d := p.podDir("ns", "job-"+string(uid), uid)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "c.log"), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.prune(func(types.UID) bool { return true }); err != nil || told != 0 {
		t.Errorf("a prune that removed nothing: told %d times, %v; want 0", told, err)
	}
	if _, err := p.prune(func(uid types.UID) bool { return uid != "u1" }); err != nil || told != 1 {
		t.Errorf("a prune that removed u1: told %d times, %v; want 1", told, err)
	}
	if err := p.remove("ns", "job-u2", "u2"); err != nil || told != 2 {
		t.Errorf("remove: told %d times, %v; want 2", told, err)
	}
}
