package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// vkLogger adapts slog to virtual-kubelet's log.Logger, so the controllers'
// logs (found through log.G(ctx)) land in kip's structured log.
//
// An entry whose error is a cancelled context (the controllers report
// every call cut short at shutdown) is logged at Debug.
type vkLogger struct {
	l         *slog.Logger
	cancelled bool
}

var _ vklog.Logger = vkLogger{}

func (v vkLogger) log(level slog.Level, msg string) {
	if v.cancelled && level > slog.LevelDebug {
		level = slog.LevelDebug
	}
	// A background context: the caller's may be cancelled mid-shutdown.
	v.l.Log(context.Background(), level, msg)
}

func (v vkLogger) Debug(args ...any)            { v.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (v vkLogger) Debugf(f string, args ...any) { v.log(slog.LevelDebug, fmt.Sprintf(f, args...)) }
func (v vkLogger) Info(args ...any)             { v.log(slog.LevelInfo, fmt.Sprint(args...)) }
func (v vkLogger) Infof(f string, args ...any)  { v.log(slog.LevelInfo, fmt.Sprintf(f, args...)) }
func (v vkLogger) Warn(args ...any)             { v.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (v vkLogger) Warnf(f string, args ...any)  { v.log(slog.LevelWarn, fmt.Sprintf(f, args...)) }
func (v vkLogger) Error(args ...any)            { v.log(slog.LevelError, fmt.Sprint(args...)) }
func (v vkLogger) Errorf(f string, args ...any) { v.log(slog.LevelError, fmt.Sprintf(f, args...)) }

// Fatal and Fatalf log at Error and do not exit: a library must not end
// the process (virtual-kubelet's node packages never call them).
func (v vkLogger) Fatal(args ...any)            { v.Error(args...) }
func (v vkLogger) Fatalf(f string, args ...any) { v.Errorf(f, args...) }

func (v vkLogger) WithField(key string, val any) vklog.Logger {
	return vkLogger{v.l.With(key, val), v.cancelled}
}

func (v vkLogger) WithFields(fields vklog.Fields) vklog.Logger {
	args := make([]any, 0, 2*len(fields))
	for k, val := range fields {
		args = append(args, k, val)
	}
	return vkLogger{v.l.With(args...), v.cancelled}
}

func (v vkLogger) WithError(err error) vklog.Logger {
	if err == nil {
		return v
	}
	cancelled := v.cancelled || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), context.Canceled.Error())
	return vkLogger{v.l.With("error", err), cancelled}
}
