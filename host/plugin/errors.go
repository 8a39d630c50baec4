package plugin

import (
	"errors"
	"strings"
)

// Kinds of Open, Reload and Describe failures, for errors.Is. An invalid
// plugin configuration is a pluginapi.InvalidConfigError instead (errors.As
// gives its Key).
var (
	// ErrMissing: no plugin binary at the path, or it is not executable.
	ErrMissing = errors.New("plugin missing")
	// ErrNotPlugin: the binary is not a Kip plugin (no handshake, exited
	// before the handshake, unrecognized output).
	ErrNotPlugin = errors.New("not a Kip plugin")
	// ErrIncompatible: the plugin speaks another protocol or API version.
	ErrIncompatible = errors.New("incompatible API version")
	// ErrChecksum: the binary's SHA-256 is not the pinned one.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrNameMismatch: the plugin reports (GetInfo) another name than the
	// one kip expects: the <name> of its file kip-plugin-<name>, or the
	// configured name of a plugin given by path.
	ErrNameMismatch = errors.New("plugin name mismatch")
	// ErrStartTimeout: the plugin did not complete its start in time.
	ErrStartTimeout = errors.New("start timeout")
	// ErrUnavailable: no plugin process answered within Config.CallWait.
	ErrUnavailable = errors.New("plugin unavailable")
	// ErrClosed: the Supervisor is closed.
	ErrClosed = errors.New("plugin supervisor closed")
)

// Error is a failure to find, describe, start or reach one plugin. Its
// message is one line naming the plugin, its path and the cause:
//
//	plugin local (/opt/kip/plugins/kip-plugin-local): checksum mismatch: pinned sha256 abc…, file has def…
type Error struct {
	Plugin string
	Path   string
	Err    error
}

func (e *Error) Error() string {
	return "plugin " + e.Plugin + " (" + e.Path + "): " + oneLine(e.Err.Error())
}

func (e *Error) Unwrap() error { return e.Err }

// kindError is an error with its own message that still matches its kind
// with errors.Is.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// oneLine folds a multi-line message (go-plugin's start errors have
// several) into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
