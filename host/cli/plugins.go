package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
)

// pluginDir picks the plugin directory: the flag, else $KIP_PLUGIN_DIR,
// else the kip binary's directory.
func pluginDir(flagValue string, env Env) string {
	if flagValue != "" {
		return flagValue
	}
	for _, kv := range env.Environ {
		if v, ok := strings.CutPrefix(kv, "KIP_PLUGIN_DIR="); ok && v != "" {
			return v
		}
	}
	if env.Executable != "" {
		return filepath.Dir(env.Executable)
	}
	return "."
}

func runPlugins(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return usageError("plugins needs a subcommand: list, describe or verify")
	}
	switch args[0] {
	case "list":
		return pluginsList(ctx, args[1:], env)
	case "describe":
		return pluginsDescribe(ctx, args[1:], env)
	case "verify":
		return pluginsVerify(ctx, args[1:], env)
	default:
		return usageError("unknown plugins subcommand %q", args[0])
	}
}

// listEntry is one row of kip plugins list.
type listEntry struct {
	Name         string                 `json:"name"`
	Version      string                 `json:"version,omitempty"`
	APIVersions  []string               `json:"apiVersions,omitempty"`
	Capabilities []pluginapi.Capability `json:"capabilities,omitempty"`
	Path         string                 `json:"path"`
	SHA256       string                 `json:"sha256,omitempty"`
	Error        string                 `json:"error,omitempty"`
}

func pluginsList(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("kip plugins list", env)
	dirFlag := fs.String("plugin-dir", "", "directory holding kip-plugin-<name> binaries")
	output := fs.String("o", "table", "output format: table or json")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("plugins list takes no arguments, got %q", rest)
	}
	if *output != "table" && *output != "json" {
		return usageError("-o must be table or json, not %q", *output)
	}
	dir := pluginDir(*dirFlag, env)
	found, err := plugin.Discover(dir)
	if err != nil {
		return fmt.Errorf("listing plugins in %s: %w", dir, err)
	}
	entries := make([]listEntry, 0, len(found))
	broken := 0
	for _, f := range found {
		e := listEntry{Name: f.Name, Path: f.Path}
		if sum, err := plugin.FileSHA256(f.Path); err == nil {
			e.SHA256 = sum
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		info, err := plugin.Describe(dctx, f.Path)
		cancel()
		if err != nil {
			e.Error = err.Error()
			broken++
		} else {
			e.Version, e.APIVersions, e.Capabilities = info.Version, info.APIVersions, info.Capabilities
		}
		entries = append(entries, e)
	}
	if *output == "json" {
		if err := writeJSON(env.Stdout, entries); err != nil {
			return err
		}
	} else {
		writeTable(env.Stdout, dir, entries)
	}
	if broken > 0 {
		return exitError{code: 1}
	}
	return nil
}

func writeTable(w io.Writer, dir string, entries []listEntry) {
	if len(entries) == 0 {
		fmt.Fprintf(w, "no plugins (kip-plugin-<name>) in %s\n", dir)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tAPI\tCAPABILITIES\tPATH\tSHA256")
	for _, e := range entries {
		version := e.Version
		if e.Error != "" {
			version = "error: " + e.Error
		}
		caps := make([]string, len(e.Capabilities))
		for i, c := range e.Capabilities {
			caps[i] = string(c)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, version, dash(strings.Join(e.APIVersions, ",")),
			dash(strings.Join(caps, ",")), e.Path, dash(e.SHA256))
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// describeOutput is what kip plugins describe prints.
type describeOutput struct {
	*pluginapi.GetInfoResponse
	// ConfigSchema shows the schema as JSON rather than as a string.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	// CatalogAge is how old the plugin's catalog is, from its date.
	CatalogAge string `json:"catalogAge,omitempty"`
	Path       string `json:"path"`
	SHA256     string `json:"sha256"`
	Protocol   int    `json:"protocol"`
}

// catalogAge renders the age of a catalog dated at in whole days.
func catalogAge(at, now time.Time) string {
	if at.IsZero() {
		return ""
	}
	days := int(now.Sub(at).Hours() / 24)
	if days < 0 {
		return "dated in the future (" + at.UTC().Format(time.DateOnly) + ")"
	}
	return strconv.Itoa(days) + " days (as of " + at.UTC().Format(time.DateOnly) + ")"
}

func pluginsDescribe(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("kip plugins describe", env)
	dirFlag := fs.String("plugin-dir", "", "directory holding kip-plugin-<name> binaries")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("plugins describe takes one plugin name")
	}
	sup, err := plugin.Open(ctx, plugin.Config{
		Name:   rest[0],
		Dir:    pluginDir(*dirFlag, env),
		Logger: quietLogger(env),
	})
	if err != nil {
		return err
	}
	defer func() { _ = sup.Close() }()
	info := sup.Info()
	var schema json.RawMessage
	if json.Valid([]byte(info.ConfigSchema)) {
		schema = json.RawMessage(info.ConfigSchema)
	}
	return writeJSON(env.Stdout, describeOutput{
		GetInfoResponse: info,
		ConfigSchema:    schema,
		CatalogAge:      catalogAge(info.Catalog.GeneratedAt, time.Now()),
		Path:            sup.Path(),
		SHA256:          sup.SHA256(),
		Protocol:        pluginapi.ProtocolVersion,
	})
}

func pluginsVerify(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("kip plugins verify", env)
	dirFlag := fs.String("plugin-dir", "", "directory holding kip-plugin-<name> binaries")
	configPath := fs.String("config", "", "kip configuration file (YAML) whose plugin.config is checked")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageError("plugins verify takes one plugin name")
	}
	if *configPath == "" {
		return usageError("plugins verify needs --config FILE")
	}
	flags := map[string]any{"plugin.name": rest[0]}
	if *dirFlag != "" {
		flags["plugin.dir"] = *dirFlag
	}
	cfg, err := config.Load(*configPath, env.Environ, flags)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	pluginConfig, err := cfg.Plugin.SettingsJSON()
	if err != nil {
		return err
	}
	pluginCfg := cfg.Plugin
	if pluginCfg.Dir == "" {
		pluginCfg.Dir = pluginDir("", env)
	}
	pluginCfg.Configure = &pluginapi.ConfigureRequest{ClusterID: cfg.ClusterID, NodeName: cfg.NodeName, Config: pluginConfig}
	pluginCfg.Logger = quietLogger(env)
	sup, err := plugin.Open(ctx, pluginCfg)
	if err != nil {
		return err
	}
	defer func() { _ = sup.Close() }()
	info := sup.Info()
	api, _ := pluginapi.CompatibleAPIVersion(info.APIVersions)
	fmt.Fprintf(env.Stdout, "plugin %s %s (%s, sha256 %s)\n", info.Name, info.Version, sup.Path(), sup.SHA256())
	fmt.Fprintf(env.Stdout, "  handshake   ok (protocol %d, API %s)\n", pluginapi.ProtocolVersion, api)
	fmt.Fprintf(env.Stdout, "  configure   ok (cluster %s, node %s)\n", cfg.ClusterID, cfg.NodeName)
	types, err := sup.Client().ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		return fmt.Errorf("plugin %s (%s): listing instance types: %w", info.Name, sup.Path(), err)
	}
	fmt.Fprintf(env.Stdout, "  catalog     ok (%d instance types)\n", len(types.InstanceTypes))
	return nil
}

// quietLogger keeps plugin chatter out of command output, whose failures
// are one line: logs are discarded unless KIP_LOG_LEVEL asks for them.
func quietLogger(env Env) *slog.Logger {
	for _, kv := range env.Environ {
		if v, ok := strings.CutPrefix(kv, "KIP_LOG_LEVEL="); ok {
			var level slog.Level
			if err := level.UnmarshalText([]byte(v)); err == nil {
				return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
			}
		}
	}
	return slog.New(slog.DiscardHandler)
}
