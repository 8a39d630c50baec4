package cells

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/host/cellclient"
	"github.com/kipcell/kip/host/keptlogs"
)

// podLogs keeps the logs of pods that ended. A kubelet keeps a
// container's log until its pod is deleted, and `kubectl logs` of a
// finished Job's pod is how most people read its result; kip ends a
// pod's cell as soon as the pod ends, so it reads each container's log
// from the agent first and keeps it under dir, one directory per pod
// (<namespace>_<name>_<uid>/<container>.log) in the kubelet's CRI log
// format that cell/api/logs reads back with kubectl's options. The directory
// goes when the pod is deleted, or when the collector finds its pod gone
// (deleted while kip was down); past maxTotal bytes the pods that ended
// first lose theirs (prune).
type podLogs struct {
	dir string
	// maxBytes is what is kept of each container's log (the newest
	// bytes); maxTotal bounds the whole directory. Zero: no bound.
	maxBytes, maxTotal int64
	log                *slog.Logger
	// changed, when set, is told of every change of dir (Config.KeptLogsChanged).
	changed func()
}

func (p podLogs) notify() {
	if p.changed != nil {
		p.changed()
	}
}

func (p podLogs) podDir(namespace, name string, uid types.UID) string {
	return filepath.Join(p.dir, keptlogs.PodDir(namespace, name, string(uid)))
}

// save reads the current log of every container of pod from agent and
// keeps it; a container the agent has no log of (it never started) is
// left out. It returns the first error; what was read is kept.
func (p podLogs) save(ctx context.Context, agent *cellclient.Agent, pod *corev1.Pod) error {
	dir := p.podDir(pod.Namespace, pod.Name, pod.UID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keeping the logs of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	defer p.notify()
	var errs []error
	for _, c := range allContainers(pod) {
		if err := p.saveContainer(ctx, agent, dir, c.Name); err != nil && !nothingToKeep(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nothingToKeep reports whether a log read failed because the container
// has no log: it never started (the agent's NotFound or
// FailedPrecondition, which reach here as a gRPC status).
func nothingToKeep(err error) bool {
	if errdefs.IsNotFound(err) {
		return true
	}
	switch status.Code(err) {
	case codes.NotFound, codes.FailedPrecondition:
		return true
	}
	return false
}

func (p podLogs) saveContainer(ctx context.Context, agent *cellclient.Agent, dir, container string) error {
	r, err := agent.Logs(ctx, container, api.ContainerLogOpts{Timestamps: true})
	if err != nil {
		return fmt.Errorf("keeping the log of container %s: %w", container, err)
	}
	defer r.Close()
	path := filepath.Join(dir, keptlogs.FileName(container))
	limit := p.maxBytes
	if limit <= 0 {
		limit = math.MaxInt64 - 1
	}
	if err := writeNewest(path, r, limit); err != nil {
		return fmt.Errorf("keeping the log of container %s: %w", container, err)
	}
	return nil
}

// writeNewest converts r to CRI log lines (toCRI) into path, keeping the
// newest limit bytes from a record's start. It streams through a
// temporary file, so a long log costs disk for a moment, never memory
// (no record is longer than a few KiB: toCRI splits long lines), and path
// holds either the whole result or nothing.
func writeNewest(path string, r io.Reader, limit int64) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	w := bufio.NewWriter(tmp)
	if err := toCRI(r, w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if size > limit {
		defer os.Remove(tmp.Name() + ".newest") // after the rename, a no-op
		if err := copyNewest(tmp.Name()+".newest", tmp, size, limit); err != nil {
			return err
		}
		return os.Rename(tmp.Name()+".newest", path)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// copyNewest writes to path the records of src (size bytes) that begin
// within its last limit bytes: from the byte before them, the first
// newline ends the record before the first one kept.
func copyNewest(path string, src io.ReaderAt, size, limit int64) error {
	br := bufio.NewReader(io.NewSectionReader(src, size-limit-1, limit+1))
	for {
		_, err := br.ReadSlice('\n')
		if err == nil {
			break
		}
		if errors.Is(err, io.EOF) {
			return os.WriteFile(path, nil, 0o600) // no record starts there
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := br.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// toCRI turns what the agent serves with timestamps ("<time> <content>"
// a line) back into CRI log lines ("<time> stdout F <content>"). The
// stream is not served, so every line counts as stdout. A line longer
// than about logs.MaxLineSize becomes partial (P) records under its
// time, as the agent wrote it, so that what this holds is bounded
// whatever a container printed; a last line without a newline ends with
// a partial record.
func toCRI(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, logs.MaxLineSize+len(time.RFC3339Nano)+1)
	var ts []byte // the time of the line going on; nil at a line's start
	for {
		piece, err := br.ReadSlice('\n')
		if len(piece) > 0 {
			tag := "F"
			if piece[len(piece)-1] == '\n' {
				piece = piece[:len(piece)-1]
			} else {
				tag = "P"
			}
			content := piece
			if ts == nil {
				t, rest, ok := bytes.Cut(piece, []byte{' '})
				if _, perr := time.Parse(time.RFC3339Nano, string(t)); !ok || perr != nil {
					return fmt.Errorf("reading the agent's log line %.80q: no timestamp", piece)
				}
				ts, content = append([]byte(nil), t...), rest
			}
			if _, werr := fmt.Fprintf(w, "%s stdout %s %s\n", ts, tag, content); werr != nil {
				return werr
			}
			if tag == "F" {
				ts = nil
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// read serves a kept container log with the kubelet API's options.
func (p podLogs) read(ctx context.Context, namespace, name string, uid types.UID, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	if opts.Previous {
		// The kubelet's words, as a 400 (the API server passes its
		// message on; a 404's it hides).
		return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found (the pod ended: kip keeps only the last run of each container)", container, name)
	}
	path := filepath.Join(p.podDir(namespace, name, uid), keptlogs.FileName(container))
	if _, err := os.Stat(path); err != nil {
		return nil, errdefs.NotFoundf("pod %s/%s ended and its cell with it: no log of container %s was kept", namespace, name, container)
	}
	o := logs.Options{TailLines: -1, Timestamps: opts.Timestamps, LimitBytes: int64(opts.LimitBytes)}
	if opts.Tail > 0 {
		o.TailLines = int64(opts.Tail)
	}
	if opts.SinceSeconds > 0 {
		o.Since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	if !opts.SinceTime.IsZero() {
		o.Since = opts.SinceTime
	}
	pr, pw := io.Pipe()
	go func() {
		// Follow ends at the file's end: the container will not write again.
		_ = pw.CloseWithError(logs.NewStore(p.dir).Read(ctx, path, o, pw))
	}()
	return pr, nil
}

// remove forgets the logs kept of a pod.
func (p podLogs) remove(namespace, name string, uid types.UID) error {
	if err := os.RemoveAll(p.podDir(namespace, name, uid)); err != nil {
		return fmt.Errorf("removing the kept logs of pod %s/%s: %w", namespace, name, err)
	}
	p.notify()
	return nil
}

// has reports whether a log of container of the pod was kept.
func (p podLogs) has(namespace, name string, uid types.UID, container string) bool {
	_, err := os.Stat(filepath.Join(p.podDir(namespace, name, uid), keptlogs.FileName(container)))
	return err == nil
}

// keptPod is one pod's directory of kept logs.
type keptPod struct {
	path      string
	namespace string
	uid       types.UID
	size      int64
	mtime     time.Time
}

// kept lists the pods whose logs are kept (keptlogs.Scan: the layout's
// names only).
func (p podLogs) kept() ([]keptPod, error) {
	l, err := keptlogs.Scan(p.dir)
	if err != nil {
		return nil, fmt.Errorf("listing the kept pod logs: %w", err)
	}
	out := make([]keptPod, 0, len(l.Pods))
	for _, pod := range l.Pods {
		ns, _, uid, _ := keptlogs.ParsePodDir(pod.Name) // Scan took only names of the layout
		k := keptPod{path: filepath.Join(p.dir, pod.Name), namespace: ns, uid: types.UID(uid)}
		for _, f := range pod.Files {
			k.size += f.Size
			if f.ModTime.After(k.mtime) {
				k.mtime = f.ModTime
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// prune removes the kept logs of pods that no longer exist (live says
// which UIDs do), then, while the rest holds more than maxTotal bytes, the
// oldest of the namespace that holds the most: a namespace whose pods
// print a lot loses its own logs first, not every other namespace's
// (one tenant cannot evict another's). It returns what it removed.
func (p podLogs) prune(live func(types.UID) bool) (removed []string, err error) {
	pods, err := p.kept()
	if err != nil {
		return nil, err
	}
	defer func() {
		if len(removed) > 0 {
			p.notify()
		}
	}()
	var total int64
	byNamespace := map[string][]keptPod{}
	usage := map[string]int64{}
	for _, k := range pods {
		if live(k.uid) {
			total += k.size
			byNamespace[k.namespace] = append(byNamespace[k.namespace], k)
			usage[k.namespace] += k.size
			continue
		}
		if err := os.RemoveAll(k.path); err != nil {
			return removed, fmt.Errorf("removing the kept logs of a deleted pod: %w", err)
		}
		removed = append(removed, k.path)
	}
	if p.maxTotal <= 0 || total <= p.maxTotal {
		return removed, nil
	}
	for _, list := range byNamespace {
		slices.SortFunc(list, func(a, b keptPod) int { return a.mtime.Compare(b.mtime) })
	}
	for total > p.maxTotal {
		// The namespace holding the most; of equals, the one whose oldest
		// log is older.
		ns := ""
		for n, list := range byNamespace {
			if len(list) == 0 {
				continue
			}
			if ns == "" || usage[n] > usage[ns] || usage[n] == usage[ns] && list[0].mtime.Before(byNamespace[ns][0].mtime) {
				ns = n
			}
		}
		if ns == "" {
			break
		}
		k := byNamespace[ns][0]
		if err := os.RemoveAll(k.path); err != nil {
			return removed, fmt.Errorf("removing kept pod logs over podLogsMaxTotalBytes: %w", err)
		}
		byNamespace[ns] = byNamespace[ns][1:]
		usage[ns] -= k.size
		total -= k.size
		removed = append(removed, k.path)
		if p.log != nil {
			p.log.Warn("removed the kept logs of an ended pod: the kept logs are over cells.podLogsMaxTotalBytes and its namespace holds the most", "dir", k.path, "namespace", ns, "bytes", k.size, "namespace_bytes", usage[ns]+k.size, "max_total_bytes", p.maxTotal)
		}
	}
	return removed, nil
}
