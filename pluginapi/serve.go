package pluginapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Factory builds a plugin's Provider. log writes structured JSON to stderr,
// which the host re-emits in its own log under the plugin's name.
type Factory func(log *slog.Logger) Provider

// LogLevelEnv names the environment variable that sets a plugin's log level
// (debug, info, warn, error); the host sets it from its own level.
const LogLevelEnv = "KIP_PLUGIN_LOG_LEVEL"

// Serve is a plugin's whole main:
//
//	func main() { pluginapi.Serve(local.New) }
//
// Started by kip (which sets the handshake cookie), it serves the provider
// over gRPC with go-plugin (protocol ProtocolVersion, AutoMTLS when the
// host asks for it), logs JSON to stderr, and exits when the host process
// dies. Started as "<binary> describe", it prints GetInfo as JSON and exits,
// without a handshake. Started as "<binary> install DIR", it copies its own
// executable to DIR/kip-plugin-<name> (the name its GetInfo reports), as an
// init container does to fill kip's plugin directory (install.go). Started
// any other way, it says what it is and exits with status 1. Serve never
// returns.
func Serve(factory Factory) {
	os.Exit(serve(os.Args, factory, os.Stdout, os.Stderr))
}

func serve(args []string, factory Factory, stdout, stderr io.Writer) int {
	log := NewLogger(stderr, os.Getenv(LogLevelEnv))
	name := filepath.Base(args[0])
	if len(args) > 1 {
		switch args[1] {
		case "describe":
			return describe(factory(log), stdout, stderr)
		case "install":
			if len(args) != 3 {
				fmt.Fprintf(stderr, "%s: install takes one argument, the directory\n"+usage, name, name, name, name)
				return 2
			}
			return install(factory(log), args[2], stdout, stderr)
		case "-h", "-help", "--help", "help":
			fmt.Fprintf(stdout, usage, name, name, name)
			return 0
		default:
			fmt.Fprintf(stderr, "%s: unknown command %q\n"+usage, name, args[1], name, name, name)
			return 2
		}
	}
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		fmt.Fprintf(stderr, usage, name, name, name)
		return 1
	}
	provider := factory(log)
	go exitWithParent(os.Getppid(), log)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(provider),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, GRPCServerOptions()...)...)
		},
		// go-plugin's own chatter stays at warn; the provider logs through log.
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "go-plugin",
			Level:      hclog.Warn,
			Output:     stderr,
			JSONFormat: true,
		}),
	})
	return 0
}

const usage = `%s is a Kip cloud plugin: kip starts it as a subprocess, it is not run by hand.
Usage:
  %s describe      print the plugin's name, version, API versions and capabilities as JSON
  %s install DIR   copy this executable to DIR/kip-plugin-<name> (atomically, mode 0755), as an
                   init container filling kip's plugin directory does
`

// describe prints GetInfo as JSON.
func describe(p Provider, stdout, stderr io.Writer) int {
	info, err := getInfo(p)
	if err != nil {
		fmt.Fprintf(stderr, "describing plugin: %v\n", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(info); err != nil {
		fmt.Fprintf(stderr, "describing plugin: %v\n", err)
		return 1
	}
	return 0
}

// exitWithParent ends the plugin when the process that started it is gone
// (its parent PID changes), so a SIGKILLed host leaves no orphan plugin.
func exitWithParent(parent int, log *slog.Logger) {
	for range time.Tick(500 * time.Millisecond) {
		if os.Getppid() != parent {
			log.Warn("host process exited; plugin exiting", "parent_pid", parent)
			os.Exit(0)
		}
	}
}

// NewLogger returns a slog logger writing the JSON line format go-plugin
// parses (@level, @message, @timestamp), so the host re-emits each record
// with its level and attributes. level is debug, info, warn or error;
// anything else means info.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "trace", "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: lv,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	}))
}
