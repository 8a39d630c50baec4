package pod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/api/logs"
	"github.com/kipcell/kip/cell/runtime"
)

// Termination messages, as the kubelet keeps them (kuberuntime's
// getTerminationMessage and readLastStringFromContainerLogs): each attempt
// gets an empty, world-writable file at its terminationMessagePath; when
// it exits, the file's last 4 KiB are the Terminated state's message, or,
// with terminationMessagePolicy FallbackToLogsOnError, an empty file and a
// non-zero exit code, the last 2 KiB of the log's last 80 lines.
const (
	maxTerminationMessage      = 4 << 10
	maxTerminationMessageLog   = 2 << 10
	maxTerminationMessageLines = 80
)

// terminationFile creates the attempt's termination message file and
// returns its mount; ok is false when the container has no
// terminationMessagePath or the pod has no directory for them.
func (m *Manager) terminationFile(c *corev1.Container, attempt int) (mount runtime.Mount, ok bool, err error) {
	path := m.terminationPath(c, attempt)
	if path == "" {
		return runtime.Mount{}, false, nil
	}
	if err := os.MkdirAll(m.cfg.TerminationDir, 0o755); err != nil {
		return runtime.Mount{}, false, fmt.Errorf("creating the termination message directory: %w", err)
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		return runtime.Mount{}, false, fmt.Errorf("creating termination message file %s: %w", path, err)
	}
	// The umask took bits off: any user of the container may write it.
	if err := os.Chmod(path, 0o666); err != nil { //nolint:gosec // the kubelet's mode: a container of any user writes its message
		return runtime.Mount{}, false, fmt.Errorf("making termination message file %s writable: %w", path, err)
	}
	return runtime.Mount{Source: path, Destination: c.TerminationMessagePath}, true, nil
}

// terminationPath is the attempt's termination message file, empty when
// the container has none (see terminationFile).
func (m *Manager) terminationPath(c *corev1.Container, attempt int) string {
	if c.TerminationMessagePath == "" || m.cfg.TerminationDir == "" {
		return ""
	}
	return filepath.Join(m.cfg.TerminationDir, c.Name+"-"+strconv.Itoa(attempt))
}

// terminationMessage reads an ended attempt's termination message (see
// above) and removes its file.
func (m *Manager) terminationMessage(ctx context.Context, c *corev1.Container, file string, exitCode int32, logPath string) string {
	var msg string
	if file != "" {
		data, err := readTail(file, maxTerminationMessage)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Sprintf("Error on reading termination log %s: %v", file, err)
		default:
			msg = string(data)
		}
		_ = os.Remove(file)
	}
	if msg != "" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || exitCode == 0 {
		return msg
	}
	var buf bytes.Buffer
	if err := m.cfg.Logs.Read(ctx, logPath, logs.Options{TailLines: maxTerminationMessageLines}, &buf); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	b := buf.Bytes()
	return string(b[max(0, len(b)-maxTerminationMessageLog):])
}

// readTail returns the last n bytes of the file at path.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size := fi.Size(); size > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, n))
}
