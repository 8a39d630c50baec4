// Package config loads kip's configuration with koanf: defaults, then a
// YAML file, then KIP_* environment variables, then command-line flags,
// each layer overriding the one before. Every error names the offending
// key, and unknown keys are refused rather than ignored.
//
// It imports only koanf and the standard library.
package config
