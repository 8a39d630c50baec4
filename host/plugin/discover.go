package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// BinaryPrefix starts the file name of every plugin binary: the plugin
// named local is the executable kip-plugin-local.
const BinaryPrefix = "kip-plugin-"

// DescribeTimeout bounds "<plugin> describe" when ctx has no earlier
// deadline.
const DescribeTimeout = 10 * time.Second

// Found is a plugin binary in a plugin directory.
type Found struct {
	// Name is the plugin's name, the <name> of kip-plugin-<name>.
	Name string
	// Path is the binary's path.
	Path string
}

// Discover lists the executable regular files named kip-plugin-<name> in
// dir (symbolic links are followed), sorted by name.
func Discover(dir string) ([]Found, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discovering plugins in %s: %w", dir, err)
	}
	var found []Found
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
		if !ok || name == "" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if checkExecutable(path) != nil {
			continue
		}
		found = append(found, Found{Name: name, Path: path})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return found, nil
}

// Find returns the path of the plugin named name in dir, or an error
// matching ErrMissing such as "plugin local: no kip-plugin-local in /dir".
func Find(dir, name string) (string, error) {
	path, err := find(dir, name)
	if err != nil {
		return "", fmt.Errorf("plugin %s: %w", name, err)
	}
	return path, nil
}

func find(dir, name string) (string, error) {
	if name == "" || strings.ContainsRune(name, filepath.Separator) {
		return "", &kindError{ErrMissing, fmt.Sprintf("invalid plugin name %q", name)}
	}
	if dir == "" {
		return "", &kindError{ErrMissing, fmt.Sprintf("no plugin directory to find %s%s in", BinaryPrefix, name)}
	}
	path := filepath.Join(dir, BinaryPrefix+name)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", &kindError{ErrMissing, fmt.Sprintf("no %s%s in %s", BinaryPrefix, name, dir)}
	}
	if err := checkExecutable(path); err != nil {
		return "", err
	}
	return path, nil
}

// checkExecutable returns nil when path is an executable regular file (after
// following links), and an error matching ErrMissing otherwise.
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &kindError{ErrMissing, fmt.Sprintf("no plugin binary at %s: %v", path, fs.ErrNotExist)}
		}
		return &kindError{ErrMissing, fmt.Sprintf("checking plugin binary: %v", err)}
	}
	if !st.Mode().IsRegular() {
		return &kindError{ErrMissing, fmt.Sprintf("%s is not a regular file", path)}
	}
	if st.Mode().Perm()&0o111 == 0 {
		return &kindError{ErrMissing, fmt.Sprintf("%s is not executable", path)}
	}
	return nil
}

// FileSHA256 returns the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Describe runs "<path> describe", which a Kip plugin answers with its
// GetInfo as JSON without a handshake, and returns the validated answer.
// A binary that is not a Kip plugin gives an *Error matching ErrNotPlugin;
// one with no compatible API version gives ErrIncompatible; a
// kip-plugin-<name> that reports another name gives ErrNameMismatch.
func Describe(ctx context.Context, path string) (*pluginapi.GetInfoResponse, error) {
	info, err := describe(ctx, path)
	if err != nil {
		return nil, &Error{Plugin: nameOf(path), Path: path, Err: err}
	}
	return info, nil
}

func describe(ctx context.Context, path string) (*pluginapi.GetInfoResponse, error) {
	if err := checkExecutable(path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, DescribeTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "describe")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	// A plugin started without the handshake cookie never serves, so a
	// cookie inherited from a parent plugin must not reach it.
	cmd.Env = withoutEnv(os.Environ(), pluginapi.Handshake.MagicCookieKey)
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, &kindError{ErrNotPlugin, fmt.Sprintf("not a Kip plugin: %q did not finish within %s: %v", "describe", DescribeTimeout, context.Cause(ctx))}
	}
	if err != nil {
		msg := firstLine(stderr.String())
		if msg == "" {
			msg = firstLine(stdout.String())
		}
		return nil, &kindError{ErrNotPlugin, fmt.Sprintf("not a Kip plugin: %q failed (%v): %s", "describe", err, msg)}
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 {
		return nil, &kindError{ErrNotPlugin, "not a Kip plugin: \"describe\" printed nothing"}
	}
	var info pluginapi.GetInfoResponse
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, &kindError{ErrNotPlugin, fmt.Sprintf("not a Kip plugin: \"describe\" printed %q, not a plugin description", firstLine(string(out)))}
	}
	if _, ok := pluginapi.CompatibleAPIVersion(info.APIVersions); !ok {
		return nil, &kindError{ErrIncompatible, fmt.Sprintf("incompatible API version: plugin implements %q, kip needs major %d", info.APIVersions, pluginapi.ProtocolVersion)}
	}
	if err := pluginapi.ValidateInfo(&info); err != nil {
		return nil, fmt.Errorf("validating plugin description: %w", err)
	}
	if base := filepath.Base(path); strings.HasPrefix(base, BinaryPrefix) && info.Name != nameOf(path) {
		return nil, &kindError{ErrNameMismatch, nameMismatch(base, info.Name, nameOf(path), false)}
	}
	return &info, nil
}

// nameMismatch says that the binary file reports the name reported where
// kip expects want: the name in its file name, or (explicit) the
// configured name of a plugin given by path.
func nameMismatch(file, reported, want string, explicit bool) string {
	if explicit {
		return fmt.Sprintf("name mismatch: %s reports the name %q, not the configured name %q", file, reported, want)
	}
	return fmt.Sprintf("name mismatch: %s reports the name %q, not %q (a plugin's file is named %s<its name>)", file, reported, want, BinaryPrefix)
}

// nameOf returns the plugin name of a binary path: the base name without
// BinaryPrefix.
func nameOf(path string) string {
	base := filepath.Base(path)
	if name, ok := strings.CutPrefix(base, BinaryPrefix); ok && name != "" {
		return name
	}
	return base
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}
