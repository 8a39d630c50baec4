package keptlogs

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Path is where the admin server serves the kept logs: the listing at
// Path, each file at Path/<pod directory>/<container>.log. Each is a
// non-resource URL the caller must be allowed to get (host/admin's
// HandleProtected); deploy/rbac/kip-kept-logs.yaml allows kip's own
// ServiceAccount.
const Path = "/keptlogs"

// Listing is what Path answers: every pod directory with its logs.
type Listing struct {
	// Generation changes whenever a file is added, removed or changed:
	// ?wait=<Generation> answers once it differs (a long poll).
	Generation string `json:"generation"`
	Pods       []Pod  `json:"pods"`
}

// Pod is one pod's directory of kept logs (ValidPodDir).
type Pod struct {
	Name  string `json:"name"`
	Files []File `json:"files"`
}

// File is one kept container log (ValidFile).
type File struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
}

// Defaults of Server's long poll.
const (
	// DefaultWait is how long a listing with ?wait= waits for a change
	// before it answers the same generation.
	DefaultWait = 20 * time.Second
	// DefaultRescan is how often a waiting listing reads the directory
	// again without Changes: the delay between a log kept and a standby
	// told. With Changes, a notification wakes it, and it reads the
	// directory again at least every RescanWithChanges (a change no
	// notification told: a standby's own mirror).
	DefaultRescan     = time.Second
	RescanWithChanges = 10 * time.Second
)

// Server serves the kept logs under Dir: the listing and each file as a
// stream (http.ServeContent: ranges, Last-Modified), never read whole.
// It reads only names of the layout (ValidPodDir, ValidFile).
type Server struct {
	Dir string
	// Wait and Rescan tune the long poll; zero means DefaultWait and
	// DefaultRescan (RescanWithChanges with Changes).
	Wait, Rescan time.Duration
	// Changes, when set, wakes a waiting listing as soon as the kept logs
	// change.
	Changes *Changes
	Log     *slog.Logger
	// scanned, when set (tests), is called after a listing's first scan.
	scanned func()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, Path)
	switch {
	case !ok:
		http.NotFound(w, r)
	case rest == "" || rest == "/":
		s.serveListing(w, r)
	default:
		s.serveFile(w, r, strings.TrimPrefix(rest, "/"))
	}
}

func (s *Server) serveListing(w http.ResponseWriter, r *http.Request) {
	// Taken before each scan, so that no change falls between the two.
	var changed <-chan struct{}
	if s.Changes != nil {
		changed = s.Changes.Changed()
	}
	l, err := Scan(s.Dir)
	if err != nil {
		s.Log.Warn("listing the kept logs", "dir", s.Dir, "error", err)
		http.Error(w, "kip could not list its kept logs", http.StatusInternalServerError)
		return
	}
	if s.scanned != nil {
		s.scanned()
	}
	if wait := r.URL.Query().Get("wait"); wait != "" && wait == l.Generation {
		deadline := time.NewTimer(cmp.Or(s.Wait, DefaultWait))
		defer deadline.Stop()
		every := cmp.Or(s.Rescan, DefaultRescan)
		if s.Changes != nil {
			every = cmp.Or(s.Rescan, RescanWithChanges)
		}
		rescan := time.NewTicker(every)
		defer rescan.Stop()
	poll:
		for l.Generation == wait {
			select {
			case <-r.Context().Done():
				return
			case <-deadline.C:
				break poll
			case <-rescan.C:
			case <-changed:
				changed = s.Changes.Changed()
			}
			if l, err = Scan(s.Dir); err != nil {
				s.Log.Warn("listing the kept logs", "dir", s.Dir, "error", err)
				http.Error(w, "kip could not list its kept logs", http.StatusInternalServerError)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(l); err != nil {
		s.Log.Debug("writing the kept logs' listing", "error", err)
	}
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rel string) {
	pod, file, ok := strings.Cut(rel, "/")
	if !ok || !ValidPodDir(pod) || !ValidFile(file) {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(filepath.Join(s.Dir, pod, file)) //nolint:gosec // G703: names of the layout, checked above: no separator, no ".."
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	http.ServeContent(w, r, file, fi.ModTime(), f)
}

// Scan lists the kept logs under dir, by name; a dir that does not exist
// holds none.
func Scan(dir string) (Listing, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Listing{}, fmt.Errorf("reading the kept logs' directory: %w", err)
	}
	l := Listing{Pods: []Pod{}}
	for _, e := range entries {
		if !e.IsDir() || !ValidPodDir(e.Name()) {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		p := Pod{Name: e.Name(), Files: []File{}}
		for _, f := range files {
			if !f.Type().IsRegular() || !ValidFile(f.Name()) {
				continue
			}
			fi, err := f.Info()
			if err != nil {
				continue
			}
			p.Files = append(p.Files, File{Name: f.Name(), Size: fi.Size(), ModTime: fi.ModTime().UTC()})
		}
		l.Pods = append(l.Pods, p)
	}
	l.Generation = generation(l.Pods)
	return l, nil
}

// generation digests pods (sorted by name, as os.ReadDir returns them).
func generation(pods []Pod) string {
	h := sha256.New()
	for _, p := range pods {
		fmt.Fprintf(h, "%s\n", p.Name)
		for _, f := range p.Files {
			fmt.Fprintf(h, "\t%s %d %d\n", f.Name, f.Size, f.ModTime.UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
