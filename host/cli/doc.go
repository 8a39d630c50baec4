// Package cli is the kip command line: flags and subcommands, their output,
// and their exit codes. cmd/kip only calls Run.
//
// It imports host packages and pluginapi; nothing imports it but cmd/kip.
package cli
