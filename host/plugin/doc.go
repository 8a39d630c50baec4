// Package plugin runs Kip's cloud plugins: it finds kip-plugin-<name>
// binaries in a plugin directory, describes them without a handshake, and
// starts and supervises one plugin process per cloud with
// hashicorp/go-plugin over gRPC.
//
// A Supervisor (Open) starts the plugin, checks the handshake, the protocol
// version, the API version, the name the plugin reports (that of its file,
// kip-plugin-<name>, or the configured name of a plugin given by path) and
// an optional SHA-256 pin, configures it, and hands out a stable
// pluginapi.Client that routes every call to the current process. When the
// process dies the Supervisor starts a new one with jittered backoff and
// callers wait for it (bounded) instead of failing; every contract call is
// idempotent, so a call cut short by a crash is retried once the new
// process is configured. Reload swaps in the binary now on disk, with a new
// pin and configuration that later restarts keep, without failing calls in
// flight; a Reload that fails its checks leaves the old process serving.
// The package catches no signal: kip's daemon calls Reload on SIGHUP.
//
// Plugin log lines (JSON on the plugin's stderr) are re-emitted into the
// host's log/slog logger with attribute plugin=<name> (hclog.go).
//
// Every call to the plugin process can be observed (Config.Calls): a gRPC
// client interceptor (interceptor.go) reports each call's method, its
// outcome by pluginapi error kind (Outcome) and its duration.
//
// Config's koanf-tagged fields are the plugin section of kip.yaml
// (config.go: DefaultConfig, Validate, SettingsJSON).
//
// This package may import pluginapi, go-plugin, go-hclog, host/setting
// (Validate's errors) and the standard library (and grpc, for go-plugin's
// GRPCPlugin signatures and the client interceptor); never client-go or
// any other host package.
package plugin
