package cli

import (
	"context"
	"log/slog"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/daemon"
)

// runDaemon is `kip run --config FILE`: the daemon, until SIGINT or SIGTERM;
// SIGHUP swaps the plugin (daemon.Run).
func runDaemon(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("kip run", env)
	configPath := fs.String("config", "", "kip configuration file (YAML); KIP_* variables and flags override it")
	dirFlag := fs.String("plugin-dir", "", "directory holding kip-plugin-<name> binaries")
	nodeName := fs.String("node-name", "", "the virtual node's name (config nodeName)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("run takes no arguments, got %q", rest)
	}
	flags := map[string]any{}
	if *dirFlag != "" {
		flags["plugin.dir"] = *dirFlag
	}
	if *nodeName != "" {
		flags["nodeName"] = *nodeName
	}
	// SIGHUP reads the configuration again the same way.
	load := func() (*config.Config, error) {
		cfg, err := config.Load(*configPath, env.Environ, flags)
		if err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		if cfg.Plugin.Dir == "" && cfg.Plugin.Path == "" {
			cfg.Plugin.Dir = pluginDir("", env)
		}
		return cfg, nil
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	return daemon.Run(ctx, cfg, Version, newLogger(env, cfg.Log), daemon.WithReload(load))
}

func newLogger(env Env, c config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(env.Stderr, opts))
}
