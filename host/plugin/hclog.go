package plugin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is hclog's Trace in slog terms.
const levelTrace = slog.LevelDebug - 4

// hclogAdapter is an hclog.Logger over a *slog.Logger, handed to go-plugin.
//
// go-plugin logs two kinds of records through it: its own chatter (on the
// root logger and names like "stdio"), which the adapter keeps at debug
// whatever its level, and the plugin's stderr lines, which go-plugin logs
// on the sub-logger Named(<binary base name>) with the level the plugin
// gave; those keep their level, message and attributes.
type hclogAdapter struct {
	log *slog.Logger
	// binary is the plugin binary's base name: Named(binary) is the
	// plugin's own log.
	binary string
	// fromPlugin is set on the plugin's own log.
	fromPlugin bool
	name       string
	args       []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// newHCLog returns the hclog.Logger for a plugin binary whose base name is
// binary; log should already carry plugin=<name>.
func newHCLog(log *slog.Logger, binary string) *hclogAdapter {
	return &hclogAdapter{log: log, binary: binary, name: "go-plugin"}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	if !a.fromPlugin && lv > slog.LevelDebug {
		lv = slog.LevelDebug
	}
	ctx := context.Background()
	h := a.log.Handler()
	if !h.Enabled(ctx, lv) {
		return
	}
	t := time.Now()
	r := slog.NewRecord(t, lv, msg, 0)
	if !a.fromPlugin {
		r.AddAttrs(slog.String("logger", a.name))
	}
	r.Add(a.args...)
	for i := 0; i < len(args); i++ {
		key, ok := args[i].(string)
		if !ok || i+1 == len(args) {
			r.Add(args[i])
			continue
		}
		val := args[i+1]
		i++
		// go-plugin appends the plugin's own timestamp; it becomes the
		// record's time rather than an attribute.
		if key == "timestamp" && a.fromPlugin {
			if s, ok := val.(string); ok {
				if pt, err := time.Parse(hclog.TimeFormat, s); err == nil {
					r.Time = pt
					continue
				}
			}
		}
		if f, ok := val.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				val = fmt.Sprintf(format, f[1:]...)
			}
		}
		r.AddAttrs(slog.Any(key, val))
	}
	_ = h.Handle(ctx, r)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	lv := slogLevel(l)
	if !a.fromPlugin && lv > slog.LevelDebug {
		lv = slog.LevelDebug
	}
	return a.log.Enabled(context.Background(), lv)
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if name == a.binary {
		c.fromPlugin = true
	}
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	c.fromPlugin = name == a.binary
	return &c
}

// SetLevel is a no-op: the slog handler decides what is logged.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

// GetLevel reports the lowest hclog level the slog handler logs, so that
// go-plugin skips parsing plugin lines that would be dropped anyway.
func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.log.Enabled(context.Background(), slogLevel(l)) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	infer := opts != nil && (opts.InferLevels || opts.InferLevelsWithTimestamp)
	return &stdWriter{a: a, infer: infer}
}

// stdWriter logs each line written to it, at info unless it starts with a
// level tag such as "[ERROR]" and levels are inferred.
type stdWriter struct {
	a     *hclogAdapter
	infer bool
}

func (w *stdWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		level := hclog.Info
		if w.infer {
			for tag, l := range map[string]hclog.Level{"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info, "[WARN]": hclog.Warn, "[ERROR]": hclog.Error, "[ERR]": hclog.Error} {
				if rest, ok := strings.CutPrefix(line, tag); ok {
					level, line = l, strings.TrimSpace(rest)
					break
				}
			}
		}
		w.a.Log(level, line)
	}
	return len(p), nil
}
