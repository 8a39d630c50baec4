// Package config loads kip's configuration with koanf: the defaults, then a
// YAML file (kip.yaml), then KIP_* environment variables, then
// command-line flags, each layer overriding the one before. Unknown keys
// are refused rather than ignored, and every error names the key as
// kip.yaml spells it, in one line: "config cells.catalogTTL: 0s is not a
// positive duration".
//
// # One owner per setting
//
// Config is kip.yaml's few top-level keys (clusterID, nodeName,
// kubeconfig, log), which are kip's own and validated here, and one
// section per component, whose type is the component's own Config:
// node.Config, cells.Config, pki.Config, match.Config, plugin.Config,
// bootstrap.Config, election.Config (leaderElection). The component owns
// its settings: its Config's koanf tags are its keys, its
// DefaultConfig the defaults and its Validate the rules, returning a
// *setting.Error that names the key within the section; Validate here puts
// the section in front. This package writes no component's default and no
// component's rule, and converts nothing: the daemon hands each section to
// its component (filling in the fields tagged koanf:"-", which are wired,
// not configured). A component never imports this package: imports run
// daemon → config → components.
//
// Tags on the component types were chosen over a table of keys here,
// because a table would be a second place to name each setting, and the
// reflection that reads the tags (keys.go) is small: a field with a koanf
// tag is a key, a struct field a section, a map a free-form key
// (plugin.config, which the plugin validates) and a type that reads
// itself from text (match.MilliCPU) a key read as text. The key list,
// the defaults, the KIP_* variable names and the daemon's SIGHUP
// comparison (Settings) all come from that walk, so a component's new
// setting needs no line here.
//
// # Keys that moved
//
// Moved maps each key that moved to its new place; Load refuses the old
// key in the file, the environment and flags, naming the new one, and
// docs/configuration.md lists them.
//
// # KIP_* variables
//
// EnvName(key) is the variable of every key: KIP_ and the key's words in
// upper case joined by underscores (KIP_CELLS_CATALOG_TTL); any variable
// that spells a key the same way without case and underscores sets it. A
// list key takes comma-separated values. plugin.config's keys are set by
// KIP_PLUGIN_CONFIG_<KEY>, its value read as YAML (env.go has the exact
// rule, docs/configuration.md the user's version). Other KIP_* variables
// are not kip's settings and are left alone.
//
// # The reference
//
// docs/configuration.md lists every key with its variable, type, default
// and the doc comment of its field, read from the components' source, and
// every plugin's settings from the config schema its TestConfigSchema keeps
// in testdata. Its generated part is TestReference's golden file (go test
// -update, or make generate, rewrites it), so make verify and make test
// fail when a field, a default or a doc comment changes without it: a
// component's doc comments are written for kip.yaml's readers too.
//
// It imports koanf, the standard library and the host components whose
// sections it loads (host/node, host/cells, host/pki, host/match,
// host/plugin, host/bootstrap, host/admin, host/election, host/setting);
// only host/daemon and host/cli import it.
package config
