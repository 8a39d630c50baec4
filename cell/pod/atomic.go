package pod

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// dataLink is the symlink that names the current payload directory of a
// file volume, as the kubelet's AtomicWriter does.
const dataLink = "..data"

// writeAtomic writes a volume's files under dir the kubelet's way: the
// payload goes to a new timestamped directory "..<time>", the "..data"
// symlink is swapped to it with a rename (atomic for readers), and each
// top-level entry is a symlink through "..data" ("key" → "..data/key").
// Modes default to 0644. With an fsGroup, the whole volume is given to
// that group before the swap, as the kubelet's setPerms does
// (setVolumeOwnership, read-only). It reports whether anything changed:
// an equal payload is left alone.
func writeAtomic(dir string, files map[string][]byte, modes map[string]uint32, fsGroup *int64) (bool, error) {
	for p := range files {
		if err := validateFilePath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("creating volume directory: %w", err)
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataLink))
	if oldTS != "" && samePayload(filepath.Join(dir, oldTS), files, modes, fsGroup != nil) {
		return false, nil
	}
	ts, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return false, fmt.Errorf("creating payload directory: %w", err)
	}
	if err := os.Chmod(ts, 0o755); err != nil { //nolint:gosec // G302: containers of any user read volume directories, as on a kubelet
		return false, fmt.Errorf("setting payload directory mode: %w", err)
	}
	for p, data := range files {
		path := filepath.Join(ts, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return false, fmt.Errorf("creating directory of %s: %w", p, err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return false, fmt.Errorf("writing %s: %w", p, err)
		}
		if err := os.Chmod(path, fileMode(modes, p)); err != nil {
			return false, fmt.Errorf("setting mode of %s: %w", p, err)
		}
	}
	if fsGroup != nil {
		if err := setVolumeOwnership(dir, *fsGroup, true); err != nil {
			return false, err
		}
	}
	tmp := filepath.Join(dir, dataLink+"_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return false, fmt.Errorf("linking payload: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return false, fmt.Errorf("swapping payload: %w", err)
	}
	// Top-level links: add the new, remove those gone.
	top := map[string]bool{}
	for p := range files {
		first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(p)), "/")
		top[first] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return false, fmt.Errorf("linking %s: %w", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("reading volume directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || top[name] || e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return false, fmt.Errorf("removing stale link %s: %w", name, err)
		}
	}
	if oldTS != "" && oldTS != filepath.Base(ts) {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return true, fmt.Errorf("removing old payload: %w", err)
		}
	}
	return true, nil
}

func fileMode(modes map[string]uint32, p string) os.FileMode {
	if m, ok := modes[p]; ok {
		return os.FileMode(m) & os.ModePerm
	}
	return 0o644
}

// validateFilePath refuses absolute paths, ".." components and paths
// starting with ".." (reserved for the payload's own entries).
func validateFilePath(p string) error {
	if p == "" || filepath.IsAbs(p) {
		return fmt.Errorf("invalid volume file path %q: must be relative", p)
	}
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid volume file path %q: must not start with '..'", p)
	}
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return fmt.Errorf("invalid volume file path %q: must not contain '..'", p)
		}
	}
	return nil
}

// samePayload reports whether dir holds exactly files with modes (made
// group-readable for an fsGroup).
func samePayload(dir string, files map[string][]byte, modes map[string]uint32, fsGroup bool) bool {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		want, ok := files[rel]
		if !ok {
			return errors.New("extra file")
		}
		info, err := d.Info()
		wantMode := fileMode(modes, rel)
		if fsGroup {
			wantMode |= roMask
		}
		if err != nil || info.Mode().Perm() != wantMode {
			return errors.New("mode differs")
		}
		got, err := os.ReadFile(path) //nolint:gosec // G122: the walk is over the agent's own state directory, which containers cannot write
		if err != nil || !bytes.Equal(got, want) {
			return errors.New("content differs")
		}
		n++
		return nil
	})
	return err == nil && n == len(files)
}
