package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	cellapi "github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/host/cells"
	"github.com/kipcell/kip/host/clusterip"
	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/node"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/host/podrefs"
	"github.com/kipcell/kip/host/serviceenv"
	"github.com/kipcell/kip/host/volumes"
	"github.com/kipcell/kip/pluginapi"
)

// What host/node finds by type assertion on the cell manager, checked at
// compile time: a signature that drifts fails the build instead of
// silently dropping the node's stats, health, extended resources,
// volumes or prompt updates.
var (
	_ node.Pods                 = (*cells.Manager)(nil)
	_ node.StatsProvider        = (*cells.Manager)(nil)
	_ node.HealthChecker        = (*cells.Manager)(nil)
	_ node.ResourceReporter     = (*cells.Manager)(nil)
	_ node.VolumeReporter       = (*cells.Manager)(nil)
	_ node.VolumeDriverReporter = (*cells.Manager)(nil)
	_ node.NodeChangeNotifier   = (*cells.Manager)(nil)
)

// staleCatalog is the catalog age past which kip warns at start-up.
const staleCatalog = 180 * 24 * time.Hour

// Run runs kip until ctx ends. cfg must be validated; version is kip's. On
// SIGHUP, Run swaps the plugin process for the binary now on disk with the
// plugin.sha256 and plugin.config of the configuration read again
// (WithReload; reload.go). With leaderElection.enabled, Run leads only
// while it holds the node's Lease and returns an error when it loses it
// (election.go). With bootstrap.kubeconfig, Run stops and returns an
// error wrapping bootstrap.ErrExpired when the node's certificate expired
// and was not renewed (bootstrap.go).
func Run(ctx context.Context, cfg *config.Config, version string, log *slog.Logger, opts ...Option) (err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bridgeKlog(log)
	hup, stopHUP := notifyHUP()
	defer stopHUP()
	// The admin server first: the TLS bootstrap may wait minutes for the
	// node's certificate, and the probes must be answered meanwhile
	// (admin.go).
	obs, err := startAdmin(ctx, cfg.Admin, cfg.Bootstrap.Enabled(), log.With("component", "admin"))
	if err != nil {
		return err
	}
	serveKeptLogs(obs, cfg, log.With("component", "keptlogs"))
	restConfig, api, certs, err := nodeIdentity(ctx, cfg, log)
	if err != nil {
		return err
	}
	if certs != nil {
		defer certs.Stop()
		obs.m.SetNodeCertificate(certs.NotAfter)
		obs.nodeCertificate.set(certs.Check)
		var stop func(error) error
		ctx, stop = untilExpired(ctx, certs.Expired())
		defer func() { err = stop(err) }()
	}
	cs, err := newClients(restConfig)
	if err != nil {
		return err
	}
	client, eventClient := cs.status, cs.events
	obs.useClients(cs)
	if err := api.preflight(ctx, client, log); err != nil {
		return err
	}
	// Everything below the preflight touches cells, the Node or its
	// Lease, or runs the cloud plugin: with leader election, only the
	// leader does it (election.go).
	if cfg.LeaderElection.Enabled {
		ecfg := cfg.LeaderElection.ForNode(cfg.NodeName)
		annotations := keptLogsAnnotations(cfg, obs, ecfg.Identity, log.With("component", "keptlogs"))
		return elect(ctx, cfg, ecfg, log, obs, client, func(ctx context.Context) error {
			return lead(ctx, cfg, version, log, o, hup, client, eventClient, api, obs, annotations, true)
		})
	}
	return lead(ctx, cfg, version, log, o, hup, client, eventClient, api, obs, nil, false)
}

// lead runs kip's node until ctx ends: the cloud plugin, the cluster CA,
// the caches, the cells (adopting those that survived) and the virtual
// node, with nodeAnnotations on its Node (where it serves its kept logs,
// with leader election). It builds them (build), reads the caches the
// cells need, and runs them as one group: the virtual node starts once
// the cells have adopted those that survived, and the first component to
// return ends them all. With drain, it returns only once its components
// have stopped (at most drainTimeout), so that a leader releases its
// Lease after its last action.
func lead(ctx context.Context, cfg *config.Config, version string, log *slog.Logger, o options, hup <-chan os.Signal,
	client, eventClient kubernetes.Interface, api apiServer, obs *observed, nodeAnnotations map[string]string, drain bool,
) error {
	c, cleanup, err := build(ctx, cfg, version, log, client, eventClient, api, obs, nodeAnnotations)
	if err != nil {
		return err
	}
	defer cleanup()

	// The cache of the node's pods must be synced before adoption decides
	// which surviving cells still have a pod.
	if err := api.syncPods(ctx, client, c.podFactory, c.podInformer, cfg.NodeName, podSyncTimeout); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx) // the Services' informer runs until lead returns
	defer stop()
	// A pod's environment needs the Services read once (as on a kubelet).
	if err := api.syncServices(ctx, client, c.svcs, cfg.NodeName, podSyncTimeout); err != nil {
		return err
	}
	g := newGroup(ctx, log)
	g.Background("clusterip", c.table.Run)
	g.Go("plugin", c.sup.Run)
	reloader := newPluginReloader(c.sup, o.reload, cfg, c.manager.RefreshCatalog, log)
	g.Go("plugin reloader", func(ctx context.Context) error { return reloader.run(ctx, hup) })
	adopted := make(chan struct{})
	g.Go("cells", func(ctx context.Context) error { return c.manager.Run(ctx, adopted) })
	if g.Ready(adopted) {
		g.Go("node", c.vk.Run)
		log.Info("kip running", "node", cfg.NodeName, "cluster", cfg.ClusterID, "plugin", c.sup.Info().Name)
	}
	return g.Wait(drain)
}

// components are what lead runs, built by build.
type components struct {
	sup         *plugin.Supervisor
	svcs        *serviceenv.Informer
	table       *clusterip.Table
	manager     *cells.Manager
	vk          *node.Node
	podFactory  informers.SharedInformerFactory
	podInformer cache.SharedIndexInformer
}

// build opens the cloud plugin and makes kip's components, wired to each
// other; nothing runs yet but the plugin's process and the event
// recorder, which cleanup stops.
func build(ctx context.Context, cfg *config.Config, version string, log *slog.Logger,
	client, eventClient kubernetes.Interface, api apiServer, obs *observed, nodeAnnotations map[string]string,
) (c *components, cleanup func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stopAll()
		}
	}()
	m := obs.m
	pluginConfig, err := cfg.Plugin.SettingsJSON()
	if err != nil {
		return nil, nil, err
	}
	pluginCfg := cfg.Plugin
	pluginCfg.Configure = &pluginapi.ConfigureRequest{ClusterID: cfg.ClusterID, NodeName: cfg.NodeName, Config: pluginConfig}
	pluginCfg.Logger, pluginCfg.LogLevel, pluginCfg.Calls = log, cfg.Log.Level, m
	sup, err := plugin.Open(ctx, pluginCfg)
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, func() { _ = sup.Close() })
	logPlugin(sup, log)

	ca, err := api.loadCA(ctx, client, cfg.PKI.Namespace, cfg.PKI.SecretName, pki.WithClusterID(cfg.ClusterID))
	if err != nil {
		return nil, nil, err
	}
	identity := insecureRegistries{CA: ca, registries: cfg.Cells.InsecureRegistries}

	// Each section of the configuration is its component's Config; the
	// daemon fills in what is wired rather than configured (koanf:"-").
	nodeCfg := cfg.Node
	nodeCfg.Name, nodeCfg.Version, nodeCfg.Annotations = cfg.NodeName, version, nodeAnnotations
	nodeCfg.VolumeDrivers = sup.Info().VolumeDrivers
	podFactory := node.NewPodInformerFactory(client, cfg.NodeName)
	podInformer := podFactory.Core().V1().Pods()
	recorder, stopEvents := node.NewEventRecorder(ctx, eventClient, cfg.NodeName)
	stops = append(stops, stopEvents)

	// The cluster's Services and EndpointSlices, watched once (one
	// informer factory) for every cell: the service environment variables
	// and the kube-dns address (host/serviceenv) and the ClusterIP table the
	// cells' service proxies serve (host/clusterip).
	if err := api.checkEndpointSlices(ctx, client); err != nil {
		return nil, nil, err
	}
	clusterFactory := informers.NewSharedInformerFactory(client, 0)
	svcs := serviceenv.New(clusterFactory, log.With("component", "services"))
	table, err := clusterip.New(clusterip.Config{NodeName: cfg.NodeName, Recorder: recorder, Log: log.With("component", "clusterip")},
		clusterFactory.Core().V1().Services(), clusterFactory.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, nil, err
	}
	cellsCfg := cfg.Cells
	cellsCfg.ClusterID, cellsCfg.NodeName = cfg.ClusterID, cfg.NodeName
	cellsCfg.Zone = cfg.Node.Zone
	cellsCfg.Match = cfg.Match.WithNodeArch(pluginapi.Arch(cfg.Node.Arch))
	cellsCfg.Cluster = podrefs.Cluster{Services: svcs, DNS: podrefs.DNS{Servers: cfg.Node.ClusterDNS, Domain: cfg.Node.ClusterDomain}}
	if obs.keptLogsChanged != nil {
		cellsCfg.KeptLogsChanged = obs.keptLogsChanged.Notify
	}
	manager := cells.New(cellsCfg, sup.Client(), identity, podrefs.ClientSource(client), podInformer.Lister(), recorder, log.With("component", "cells"),
		cells.WithServices(table), cells.WithMetrics(m), cells.WithVolumes(volumes.NewSource(client)))
	obs.pluginReady.set(manager.Healthy)

	if err := watchPodConditions(podInformer.Informer(), manager); err != nil {
		return nil, nil, err
	}
	vk, err := node.New(client, manager, nodeCfg, log.With("component", "node"),
		node.WithPodInformerFactory(podFactory), node.WithEventRecorder(recorder), node.WithOwnedAnnotations(cells.AnnotationPlacedPrefix))
	if err != nil {
		return nil, nil, err
	}
	return &components{sup: sup, svcs: svcs, table: table, manager: manager, vk: vk, podFactory: podFactory, podInformer: podInformer.Informer()},
		stopAll, nil
}

// logPlugin logs the plugin kip runs and warns when its catalog is old.
func logPlugin(sup *plugin.Supervisor, log *slog.Logger) {
	info := sup.Info()
	log.Info("cloud plugin ready", "plugin", info.Name, "version", info.Version, "path", sup.Path(), "sha256", sup.SHA256())
	if at := info.Catalog.GeneratedAt; !at.IsZero() {
		age := time.Since(at)
		log.Info("instance-type catalog", "source", info.Catalog.Source, "as_of", at.UTC().Format(time.DateOnly), "age_days", int(age.Hours()/24))
		if age > staleCatalog {
			log.Warn("the plugin's instance-type catalog is old: prices may have changed; update the plugin",
				"age_days", int(age.Hours()/24), "as_of", at.UTC().Format(time.DateOnly))
		}
	}
}

// insecureRegistries adds the configured plain-HTTP registries to every
// cell's bootstrap.
type insecureRegistries struct {
	*pki.CA
	registries []string
}

func (i insecureRegistries) Bootstrap(cellID, clusterID, nodeName, podUID string, tokenTTL time.Duration) (*cellapi.Bootstrap, error) {
	b, err := i.CA.Bootstrap(cellID, clusterID, nodeName, podUID, tokenTTL)
	if err != nil {
		return nil, err
	}
	b.InsecureRegistries = append(b.InsecureRegistries, i.registries...)
	return b, nil
}

// watchPodConditions tells the cells of pod updates: conditions others
// write (readiness gates) change a pod's Ready.
func watchPodConditions(informer cache.SharedIndexInformer, manager *cells.Manager) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			c, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 {
				manager.PodUpdated(o, c)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching pod conditions: %w", err)
	}
	return nil
}
