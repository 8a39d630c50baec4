package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"

	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
)

// Loader reads kip's configuration again, as `kip run` first read it (the
// same file, KIP_* environment and flags, with the same defaults), and
// validates it. kip calls it on SIGHUP.
type Loader func() (*config.Config, error)

// Option changes how Run runs.
type Option func(*options)

type options struct {
	reload Loader
}

// WithReload makes SIGHUP read the configuration with load; without it,
// SIGHUP swaps the plugin binary with the configuration kip started with.
func WithReload(load Loader) Option { return func(o *options) { o.reload = load } }

// swapKeys are the configuration keys a SIGHUP applies, by swapping the
// plugin process.
var swapKeys = map[string]bool{"plugin.sha256": true, "plugin.config": true}

// restartKeys are the keys a plugin swap cannot change: which plugin runs,
// from where, and for which cluster and node (the cells the running
// process launched are tagged with them). A SIGHUP that finds them changed
// swaps nothing.
var restartKeys = map[string]bool{
	"plugin.name": true, "plugin.dir": true, "plugin.path": true, "clusterID": true, "nodeName": true,
}

// swapper is what a reload needs of the plugin's Supervisor.
type swapper interface {
	Reload(ctx context.Context, rc plugin.ReloadConfig) error
	Path() string
}

// pluginReloader swaps the cloud plugin on SIGHUP. It reads the
// configuration again and, unless a key a swap cannot change has changed,
// has the Supervisor start the binary now on disk with the new
// plugin.sha256 and plugin.config. Cells and pods are untouched: the new
// process finds the instances in the cloud.
type pluginReloader struct {
	plugin swapper
	load   Loader
	// running is the configuration kip runs with; its plugin section
	// follows every swap.
	running config.Config
	// swapped runs after every successful swap (the cells refresh the
	// catalog and capabilities the new process offers).
	swapped func()
	log     *slog.Logger
}

// newPluginReloader reloads sup with what load reads; a nil load swaps the
// binary with the configuration kip started with. swapped, if not nil,
// runs after every successful swap.
func newPluginReloader(sup swapper, load Loader, cfg *config.Config, swapped func(), log *slog.Logger) *pluginReloader {
	if load == nil {
		load = func() (*config.Config, error) { c := *cfg; return &c, nil }
	}
	if swapped == nil {
		swapped = func() {}
	}
	return &pluginReloader{plugin: sup, load: load, running: *cfg, swapped: swapped, log: log}
}

// notifyHUP starts catching SIGHUP (which would otherwise end kip) into
// the returned channel; stop ends that.
func notifyHUP() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// run reloads the plugin on every signal from hup until ctx ends. A reload
// refused is one error line naming the plugin, its path and why; kip keeps
// running with the plugin process it has.
func (r *pluginReloader) run(ctx context.Context, hup <-chan os.Signal) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := r.reload(ctx); err != nil {
				r.log.Error("SIGHUP: plugin not reloaded; the running plugin process keeps serving", "error", err)
			}
		}
	}
}

// reload reads the configuration and swaps the plugin. Its error is a
// *plugin.Error, "plugin <name> (<path>): reloading: <why>".
func (r *pluginReloader) reload(ctx context.Context) error {
	name, path := r.running.Plugin.Name, r.plugin.Path()
	refuse := func(err error) error {
		return &plugin.Error{Plugin: name, Path: path, Err: fmt.Errorf("reloading: %w", err)}
	}
	r.log.Info("SIGHUP: reloading the plugin", "plugin", name, "path", path)
	next, err := r.load()
	if err != nil {
		return refuse(fmt.Errorf("re-reading the configuration: %w (fix it and send SIGHUP again)", err))
	}
	var restart, later []string
	for _, c := range changes(r.running, *next) {
		switch {
		case restartKeys[c.key]:
			restart = append(restart, fmt.Sprintf("%s from %q to %q", c.key, c.old, c.new))
		case !swapKeys[c.key]:
			later = append(later, c.key)
		}
	}
	if len(restart) > 0 {
		return refuse(fmt.Errorf("the configuration changes %s, which a plugin swap cannot: restart kip to apply it",
			strings.Join(restart, ", ")))
	}
	if len(later) > 0 {
		r.log.Warn("SIGHUP applies plugin.sha256 and plugin.config only; these changes wait for a restart of kip", "keys", later)
	}
	conf, err := next.Plugin.SettingsJSON()
	if err != nil {
		return refuse(err)
	}
	err = r.plugin.Reload(ctx, plugin.ReloadConfig{
		SHA256:    next.Plugin.SHA256,
		Configure: &pluginapi.ConfigureRequest{ClusterID: r.running.ClusterID, NodeName: r.running.NodeName, Config: conf},
	})
	if err != nil {
		return err
	}
	r.running.Plugin = next.Plugin
	r.swapped()
	return nil
}

// change is a configuration key whose value differs.
type change struct {
	key      string
	old, new any
}

// changes lists the keys (as kip.yaml spells them) whose values differ
// between a and b, in field order.
func changes(a, b config.Config) []change {
	var out []change
	bs := b.Settings()
	for i, s := range a.Settings() {
		if !reflect.DeepEqual(s.Value, bs[i].Value) {
			out = append(out, change{key: s.Key, old: s.Value, new: bs[i].Value})
		}
	}
	return out
}
