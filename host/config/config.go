package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/bootstrap"
	"github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/election"
	"github.com/kipcell/kip/host/keptlogs"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/host/setting"
)

// Config is kip's configuration: kip.yaml's top-level keys, and a section
// per component, each the component's own Config.
type Config struct {
	// ClusterID names this cluster among those sharing a cloud account;
	// every instance is tagged with it and kip only ever touches instances
	// that carry it.
	ClusterID string `koanf:"clusterID"`
	// NodeName is the name of the virtual node.
	NodeName string `koanf:"nodeName"`
	// Kubeconfig is the kubeconfig kip uses (ideally a system:node:<name>
	// identity), or "in-cluster" for the pod's ServiceAccount; empty means
	// $KUBECONFIG, then ~/.kube/config, then the in-cluster config
	// (host/kubeconfig).
	// Not with bootstrap.kubeconfig, which gets the node identity instead.
	Kubeconfig string `koanf:"kubeconfig"`
	// Bootstrap gets the node identity by TLS bootstrap (off by default).
	Bootstrap bootstrap.Config `koanf:"bootstrap"`
	// Node configures the virtual node and its kubelet API.
	Node node.Config `koanf:"node"`
	// Cells configures how pods become cells.
	Cells cells.Config `koanf:"cells"`
	// PKI says where the cluster CA is kept.
	PKI pki.Config `koanf:"pki"`
	// Match tunes how pods are matched to instance types.
	Match match.Config `koanf:"match"`
	// Plugin selects and configures the cloud plugin.
	Plugin plugin.Config `koanf:"plugin"`
	// Admin configures the admin HTTP server: metrics, probes, /cells.
	Admin admin.Config `koanf:"admin"`
	// LeaderElection makes several kip processes for one node agree on
	// one leader through a Lease (host/election).
	LeaderElection election.Config `koanf:"leaderElection"`
	// KeptLogs makes standbys mirror the leader's kept logs of ended pods
	// (host/keptlogs).
	KeptLogs keptlogs.Config `koanf:"keptLogs"`
	// Log sets the host's log output.
	Log Log `koanf:"log"`
}

// Log sets the host's log output.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
	// Format is json or text.
	Format string `koanf:"format"`
}

// Defaults is the configuration before any file, environment or flag:
// each component's DefaultConfig.
func Defaults() *Config {
	return &Config{
		NodeName:       node.DefaultName,
		Node:           node.DefaultConfig(node.DefaultName),
		Bootstrap:      bootstrap.DefaultConfig(),
		Cells:          cells.DefaultConfig(),
		PKI:            pki.DefaultConfig(),
		Match:          match.DefaultConfig(),
		Plugin:         plugin.DefaultConfig(),
		Admin:          admin.DefaultConfig(),
		LeaderElection: election.DefaultConfig(),
		KeptLogs:       keptlogs.DefaultConfig(),
		Log:            Log{Level: "info", Format: "json"},
	}
}

// Moved maps every key that moved to where it is now. Load refuses the old
// key, in the file, the environment and flags, naming the new one;
// docs/configuration.md's "Keys that moved" lists them (reference_test.go
// writes it from this map).
var Moved = map[string]string{
	"match.unavailableTTL":  "cells.unavailableTTL",
	"match.catalogTTL":      "cells.catalogTTL",
	"match.rematchInterval": "cells.rematchInterval",
}

// Error is a configuration error that names the key at fault.
type Error struct {
	Key string
	// Source is where the key was read (the file, a KIP_* variable,
	// "flags"); empty once the layers are merged.
	Source string
	Reason string
}

func (e *Error) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("config %s (%s): %s", e.Key, e.Source, e.Reason)
	}
	return fmt.Sprintf("config %s: %s", e.Key, e.Reason)
}

// Load builds the configuration from the defaults, path (may be empty),
// the environment (as os.Environ; only KIP_* variables that name a key are
// used, see env.go) and flags (already-parsed flag values by config key,
// may be nil), each layer overriding the one before. It does not validate:
// call Validate.
func Load(path string, environ []string, flags map[string]any) (*Config, error) {
	keys := keysOf(Defaults())
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(keys.defaults, "."), nil); err != nil {
		return nil, fmt.Errorf("loading defaults: %w", err)
	}
	fk := koanf.New(".")
	if path != "" {
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("reading config file %s: %w", path, err)
		}
		if err := keys.check(fk.All(), path); err != nil {
			return nil, err
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("merging config file %s: %w", path, err)
		}
	}
	env, err := keys.env(environ, fk.Keys())
	if err != nil {
		return nil, err
	}
	if len(env) > 0 {
		if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
			return nil, fmt.Errorf("loading environment: %w", err)
		}
	}
	if len(flags) > 0 {
		if err := keys.check(flags, "flags"); err != nil {
			return nil, err
		}
		if err := k.Load(confmap.Provider(flags, "."), nil); err != nil {
			return nil, fmt.Errorf("loading flags: %w", err)
		}
	}
	if err := keys.numbersAsText(k); err != nil {
		return nil, err
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, decodeError(err, k)
	}
	for _, p := range []*string{&c.Kubeconfig, &c.Bootstrap.Kubeconfig, &c.Bootstrap.CertDir, &c.Node.TLSCertFile, &c.Node.TLSKeyFile, &c.Node.ClientCAFile, &c.Plugin.Dir, &c.Plugin.Path, &c.Cells.PodLogsDir, &c.LeaderElection.Kubeconfig, &c.KeptLogs.TokenFile} {
		*p = expandHome(*p)
	}
	return &c, nil
}

// expandHome turns a leading "~/" into the user's home directory, as a
// shell would for the paths people write in the file.
func expandHome(path string) string {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, rest)
}

// check refuses, naming the first in key order, a key that moved, a key
// that is not known (suggesting the known key it resembles), and a
// free-form key (plugin.config) that is not a mapping. values is a layer
// by key, flat or nested.
func (ks *keySet) check(values map[string]any, source string) error {
	flat := flatten(values)
	names := make([]string, 0, len(flat))
	for key := range flat {
		names = append(names, key)
	}
	sort.Strings(names)
	for _, key := range names {
		if to, ok := Moved[key]; ok {
			return &Error{Key: key, Source: source, Reason: fmt.Sprintf("moved to %s: rename it (docs/configuration.md lists every move)", to)}
		}
		if ks.settable(key) {
			continue
		}
		return &Error{Key: key, Source: source, Reason: "unknown key" + ks.suggest(key)}
	}
	for key := range ks.freeForm {
		if err := checkMapping(key, flat[key], source); err != nil {
			return err
		}
	}
	for key := range ks.records {
		if err := ks.checkEntries(key, flat[key], source); err != nil {
			return err
		}
	}
	return nil
}

// checkEntries refuses, naming it as key[i].field, a field that an entry
// of the record key (a list of mappings) does not have: the decoder would
// drop it without a word, and a pool whose "count" was spelt "cuont"
// would silently keep no standby.
func (ks *keySet) checkEntries(key string, v any, source string) error {
	entries, _ := v.([]any)
	fields := ks.fields[key]
	for i, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			continue // the decoder says what is wrong with it
		}
		flat := flatten(m)
		names := make([]string, 0, len(flat))
		for name := range flat {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if fields[name] || isParent(fields, name) {
				continue
			}
			reason := "unknown key"
			for field := range fields {
				if normalize(field) == normalize(name) {
					reason += fmt.Sprintf(" (did you mean %s?)", field)
				}
			}
			return &Error{Key: fmt.Sprintf("%s[%d].%s", key, i, name), Source: source, Reason: reason}
		}
	}
	return nil
}

// isParent reports whether name is a mapping holding some of fields
// ("size" of "size.cpu").
func isParent(fields map[string]bool, name string) bool {
	for field := range fields {
		if strings.HasPrefix(field, name+".") {
			return true
		}
	}
	return false
}

// flatten turns a layer, flat (flags: "plugin.dir") or nested (a file),
// into its keys and values; a free-form mapping's keys are listed too,
// and the mapping itself under its own key.
func flatten(values map[string]any) map[string]any {
	out := make(map[string]any)
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for key, v := range m {
			key = prefix + key
			out[key] = v
			if sub, ok := v.(map[string]any); ok {
				walk(key+".", sub)
			}
		}
	}
	walk("", values)
	return out
}

// checkMapping refuses a free-form key whose value is not a mapping (a
// string, a list, a number) in one line naming the key, before the decoder
// would say so in several lines of Go types. Empty (null) is fine: no
// settings.
func checkMapping(key string, v any, source string) error {
	var kind string
	switch v.(type) {
	case nil, map[string]any:
		return nil
	case string:
		kind = "a string"
	case []any:
		kind = "a list"
	case bool:
		kind = "true or false"
	default:
		kind = "a single value"
	}
	return &Error{Key: key, Source: source, Reason: "must be a mapping of the plugin's settings (key: value lines), not " + kind}
}

// suggest names the known key that key spells without its case, dots,
// dashes or underscores.
func (ks *keySet) suggest(key string) string {
	if known, ok := ks.byNorm[normalize(key)]; ok {
		return fmt.Sprintf(" (did you mean %s?)", known)
	}
	return ""
}

// numbersAsText turns a number (or true, false) given for a setting read
// as text into its text: agentReserveCPU: 1 is one CPU, as "1" is, not one
// millicore.
func (ks *keySet) numbersAsText(k *koanf.Koanf) error {
	for key := range ks.text {
		switch v := k.Get(key).(type) {
		case nil, string:
		default:
			if err := k.Set(key, fmt.Sprint(v)); err != nil {
				return fmt.Errorf("reading %s as text: %w", key, err)
			}
		}
	}
	return nil
}

// decodeError turns the decoder's errors into one line per key, quoting
// the value k holds for it.
func decodeError(err error, k *koanf.Koanf) error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		if named, ok := e.(interface{ Name() string }); ok {
			reason := e.Error()
			if inner := errors.Unwrap(e); inner != nil {
				reason = inner.Error()
			}
			if value := fmt.Sprintf("%q", fmt.Sprint(k.Get(named.Name()))); !strings.Contains(reason, value) {
				reason = value + ": " + reason
			}
			out = append(out, &Error{Key: named.Name(), Reason: reason})
			return
		}
		if inner := errors.Unwrap(e); inner != nil {
			walk(inner)
		}
	}
	walk(err)
	if len(out) == 0 {
		return fmt.Errorf("decoding config: %w", err)
	}
	return errors.Join(out...)
}

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// Validate checks the whole configuration: kip's own top-level and log
// keys here, each section with its component's Validate. Every error names
// the key as kip.yaml spells it.
func (c *Config) Validate() error {
	var errs []error
	if c.ClusterID == "" {
		errs = append(errs, &Error{Key: "clusterID", Reason: "required: a name unique among the clusters that share this cloud account"})
	} else if !dnsLabel.MatchString(c.ClusterID) {
		errs = append(errs, &Error{Key: "clusterID", Reason: fmt.Sprintf("%q is not a DNS label (lower-case letters, digits and -, at most 63)", c.ClusterID)})
	}
	if err := node.ValidateName(c.NodeName); err != nil {
		errs = append(errs, &Error{Key: "nodeName", Reason: err.Error()})
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, &Error{Key: "log.level", Reason: fmt.Sprintf("%q is not one of debug, info, warn, error", c.Log.Level)})
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		errs = append(errs, &Error{Key: "log.format", Reason: fmt.Sprintf("%q is not one of json, text", c.Log.Format)})
	}
	if c.Kubeconfig != "" && c.Bootstrap.Enabled() {
		errs = append(errs, &Error{Key: "bootstrap.kubeconfig", Reason: "set together with kubeconfig: give kubeconfig (the node's own credentials) or bootstrap.kubeconfig (an identity that gets them by TLS bootstrap), not both"})
	}
	errs = append(errs, inSection("bootstrap", c.Bootstrap.Validate())...)
	errs = append(errs, inSection("node", c.Node.Validate())...)
	errs = append(errs, inSection("cells", c.Cells.Validate())...)
	errs = append(errs, inSection("match", c.Match.Validate())...)
	errs = append(errs, inSection("plugin", c.Plugin.Validate())...)
	errs = append(errs, inSection("admin", c.Admin.Validate())...)
	errs = append(errs, inSection("leaderElection", c.LeaderElection.Validate())...)
	errs = append(errs, inSection("keptLogs", c.KeptLogs.Validate())...)
	return errors.Join(errs...)
}

// inSection names the keys of a component's Validate errors as kip.yaml
// spells them: a *setting.Error's key under section, any other error the
// section itself.
func inSection(section string, err error) []error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, inSection(section, e)...)
		}
		return out
	}
	var serr *setting.Error
	if errors.As(err, &serr) {
		return []error{&Error{Key: section + "." + serr.Key, Reason: serr.Reason}}
	}
	return []error{&Error{Key: section, Reason: err.Error()}}
}
