package localcells

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/host/plugin"
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/test/cloudsim/simcells"
)

// Config configures LocalCells.
type Config struct {
	// PluginPath is the kip-plugin-local binary.
	PluginPath string
	// AgentCommand is the local plugin's agentCommand: the cell agent's
	// command line, with {bootstrap}, {address} and {cellID} placeholders
	// (for a real cell: kip-cell --bootstrap {bootstrap} …), and {imds}:
	// the unix socket of the instance's metadata service (kip-cell
	// --imds-endpoint unix://{imds}), and {disks}: the instance's disk
	// path root, where AttachDisk links its disks at their cloud paths
	// (kip-cell --disk-path-root {disks}; disks.go).
	AgentCommand []string
	// StateDir is the local plugin's stateDir (required: cells of
	// different simulators must not share one).
	StateDir string
	// Network is the local plugin's network mode; empty means loopback,
	// which needs no privileges.
	Network string
	// PluginConfig holds further keys of the local plugin's configuration
	// (bridge, subnet, terminationGrace, …); they win over the fields
	// above and over LocalCells' attachmentLimit (diskAttachmentLimit).
	// The disks need the cells in the plugin's own mount namespace (no
	// mountNamespace).
	PluginConfig map[string]any
	// InstanceTypes are the cloud's types to size local cells like
	// (required): the types the simulator launches (ec2sim.CellTypes of
	// its instance types, gcesim's machine types).
	InstanceTypes []simcells.InstanceType
	// ClusterID and NodeName are what the local plugin is configured with;
	// empty means "simcells".
	ClusterID string
	NodeName  string
	// Logger receives the supervisor's and the plugin's logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Metadata also serves each instance's metadata (what the simulator
	// serves at IMDSSocket) at MetadataAddress, as its cloud does: from a
	// network namespace beside the cell's, which the cell's namespace
	// routes to (metadata.go). It needs Network netns, and root.
	Metadata bool
}

// LocalCells is a CellStarter backed by the real local plugin: each
// instance is a local cell whose cell ID is the simulated instance's ID
// (EC2) or name (GCE) and whose instance type has the cloud type's name,
// CPU and memory (the local plugin's catalog is configured from
// InstanceTypes). The cell's address (127.77.0.N in loopback mode)
// becomes the instance's private IP.
//
// The agent of each cell waits for StartAgent (LocalCells is an
// AgentStarter): its command line runs behind a shell loop that waits for
// a file named after the cell in a directory of its own.
type LocalCells struct {
	sup   *plugin.Supervisor
	log   *slog.Logger
	gates string // the directory of the files that let agents start
	// imdsDir holds the instances' IMDS sockets when the agent command
	// has {imds} or Config.Metadata is set; empty otherwise.
	imdsDir string
	// metadata: Config.Metadata.
	metadata bool
	// stateDir is the local plugin's (absolute), where its disks are;
	// zone is the plugin's zone, which LocalCells' disks lie in.
	stateDir, zone string
	// diskRoots holds the instances' disk path roots (disks.go).
	diskRoots string

	mu        sync.Mutex
	cells     map[string]string       // simulated instance ID → local instance ID
	metadatas map[string]*metadataNet // simulated instance ID → its metadata's namespace
	// diskLinks: simulated instance ID → disk handle → the path its link
	// has under the instance's disk path root.
	diskLinks map[string]map[string]string
}

var (
	_ simcells.AgentStarter = (*LocalCells)(nil)
	_ simcells.IMDSLocator  = (*LocalCells)(nil)
)

// New starts the local plugin under a host/plugin Supervisor and
// configures it.
func New(ctx context.Context, cfg Config) (*LocalCells, error) {
	if cfg.PluginPath == "" || len(cfg.AgentCommand) == 0 || cfg.StateDir == "" || len(cfg.InstanceTypes) == 0 {
		return nil, errors.New("starting local cells: PluginPath, AgentCommand, StateDir and InstanceTypes are required")
	}
	localTypes := make([]map[string]any, 0, len(cfg.InstanceTypes))
	for _, t := range cfg.InstanceTypes {
		localTypes = append(localTypes, map[string]any{"name": t.Name, "milliCPU": int64(t.VCPUs) * 1000, "memoryMiB": t.MemoryMiB})
	}
	if cfg.Metadata && cfg.Network != "netns" {
		return nil, errors.New("starting local cells: Metadata needs Network netns")
	}
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("starting local cells: %w", err)
	}
	agent, imdsDir, err := imdsCommand(cfg.AgentCommand, cfg.Metadata)
	if err != nil {
		return nil, err
	}
	// What New made, removed if it fails.
	made := []string{imdsDir}
	fail := func(err error) (*LocalCells, error) {
		for _, dir := range made {
			if dir != "" {
				_ = os.RemoveAll(dir)
			}
		}
		return nil, err
	}
	diskRoots, err := os.MkdirTemp("", "simcells-disks-")
	if err != nil {
		return fail(fmt.Errorf("starting local cells: %w", err))
	}
	made = append(made, diskRoots)
	agent = replaceAll(agent, "{disks}", filepath.Join(diskRoots, "{cellID}"))
	gates, err := os.MkdirTemp("", "simcells-agent-gates-")
	if err != nil {
		return fail(fmt.Errorf("starting local cells: %w", err))
	}
	made = append(made, gates)
	// The instance (the cell, its address) runs at once; its agent once
	// StartAgent has made the cell's file.
	gated := append([]string{"/bin/sh", "-c", `while [ ! -e "$0" ]; do sleep 0.1; done; exec "$@"`,
		filepath.Join(gates, "{cellID}")}, agent...)
	conf := map[string]any{
		"agentCommand":    gated,
		"stateDir":        stateDir,
		"network":         cmp.Or(cfg.Network, "loopback"),
		"instanceTypes":   localTypes,
		"attachmentLimit": diskAttachmentLimit,
	}
	maps.Copy(conf, cfg.PluginConfig)
	raw, err := json.Marshal(conf)
	if err != nil {
		return fail(fmt.Errorf("encoding local plugin configuration: %w", err))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	sup, err := plugin.Open(ctx, plugin.Config{
		Name: "local",
		Path: cfg.PluginPath,
		Configure: &pluginapi.ConfigureRequest{
			ClusterID: cmp.Or(cfg.ClusterID, "simcells"),
			NodeName:  cmp.Or(cfg.NodeName, "simcells"),
			Config:    raw,
		},
		Logger: log,
	})
	if err != nil {
		return fail(fmt.Errorf("starting local cells: %w", err))
	}
	// The disks lie in the plugin's one zone (its configuration's, else
	// its default), which its catalog's offerings name.
	zone, err := pluginZone(ctx, sup.Client())
	if err != nil {
		_ = sup.Close()
		return fail(fmt.Errorf("starting local cells: %w", err))
	}
	return &LocalCells{
		sup: sup, log: log.With("cells", "local"), gates: gates, imdsDir: imdsDir, metadata: cfg.Metadata,
		stateDir: stateDir, zone: zone, diskRoots: diskRoots,
		cells: map[string]string{}, metadatas: map[string]*metadataNet{}, diskLinks: map[string]map[string]string{},
	}, nil
}

// pluginZone is the zone of the local plugin's offerings.
func pluginZone(ctx context.Context, client pluginapi.Client) (string, error) {
	types, err := client.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		return "", fmt.Errorf("listing the local plugin's instance types: %w", err)
	}
	for _, t := range types.InstanceTypes {
		for _, o := range t.Offerings {
			if o.Zone != "" {
				return o.Zone, nil
			}
		}
	}
	return "", errors.New("the local plugin offers its instance types in no zone")
}

// replaceAll replaces placeholder with value in every argument of argv.
func replaceAll(argv []string, placeholder, value string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, placeholder, value)
	}
	return out
}

// imdsCommand replaces {imds} in an agent command with a socket path in a
// new directory, named by the cell ID (the instance ID, which the local
// plugin substitutes for {cellID}). Without {imds} it changes nothing,
// and makes the directory only if always.
func imdsCommand(argv []string, always bool) ([]string, string, error) {
	if !always && !slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, "{imds}") }) {
		return argv, "", nil
	}
	// A short path: a unix socket's is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "simcells-imds-")
	if err != nil {
		return nil, "", fmt.Errorf("making the IMDS socket directory: %w", err)
	}
	return replaceAll(argv, "{imds}", filepath.Join(dir, "{cellID}.sock")), dir, nil
}

// IMDSSocket is where the instance's cell finds its metadata ({imds}), or
// "" when the agent command has no {imds}.
func (c *LocalCells) IMDSSocket(instanceID string) string {
	if c.imdsDir == "" {
		return ""
	}
	return filepath.Join(c.imdsDir, instanceID+".sock")
}

// Client is the local plugin's client, for tests that look at the cells.
func (c *LocalCells) Client() pluginapi.Client { return c.sup.Client() }

// LocalID returns the local plugin's instance ID of the cell of a
// simulated instance.
func (c *LocalCells) LocalID(instanceID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.cells[instanceID]
	return id, ok
}

// Start launches the local cell of an instance and waits until the local
// plugin reports it running with an address. The cell's pod address is
// the local plugin's (netns mode); in loopback mode it has none.
func (c *LocalCells) Start(ctx context.Context, instanceID, instanceType string, bootstrap []byte) (simcells.Addresses, error) {
	var none simcells.Addresses
	resp, err := c.sup.Client().Launch(ctx, &pluginapi.LaunchRequest{
		CellID:       instanceID,
		NodeName:     "simcells",
		PodUID:       instanceID,
		InstanceType: instanceType,
		CapacityType: pluginapi.CapacityOnDemand,
		Bootstrap:    bootstrap,
		Tags:         map[string]string{"simcells/instance-id": instanceID},
	})
	if err != nil {
		return none, fmt.Errorf("launching local cell for %s: %w", instanceID, err)
	}
	inst := resp.Instance
	c.mu.Lock()
	c.cells[instanceID] = inst.ID
	c.mu.Unlock()
	for inst.State != pluginapi.StateRunning || inst.PrivateAddress() == "" {
		switch inst.State {
		case pluginapi.StateTerminated, pluginapi.StateTerminating:
			return none, fmt.Errorf("launching local cell for %s: cell %s is %s (%s)", instanceID, inst.ID, inst.State, inst.StateReason)
		}
		select {
		case <-ctx.Done():
			return none, fmt.Errorf("waiting for local cell %s: %w", inst.ID, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		d, err := c.sup.Client().Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
		if err != nil {
			return none, fmt.Errorf("describing local cell %s: %w", inst.ID, err)
		}
		if len(d.Instances) == 0 {
			return none, fmt.Errorf("launching local cell for %s: cell %s vanished", instanceID, inst.ID)
		}
		inst = d.Instances[0]
	}
	c.log.Info("local cell running", "instance", instanceID, "local", inst.ID, "address", inst.PrivateAddress(), "pod_address", inst.PodAddress())
	if c.metadata {
		if err := c.serveMetadata(ctx, instanceID, inst.PrivateAddress()); err != nil {
			return none, err
		}
	}
	return simcells.Addresses{Private: inst.PrivateAddress(), Pod: inst.PodAddress()}, nil
}

// StartAgent lets the agent of an instance's cell start.
func (c *LocalCells) StartAgent(_ context.Context, instanceID string) error {
	if err := os.WriteFile(filepath.Join(c.gates, instanceID), nil, 0o600); err != nil {
		return fmt.Errorf("starting the agent of %s: %w", instanceID, err)
	}
	return nil
}

// Stop terminates the local cell of an instance; a cell that is gone is
// stopped.
func (c *LocalCells) Stop(ctx context.Context, instanceID string) error {
	if err := c.stopMetadata(ctx, instanceID); err != nil {
		return err
	}
	c.mu.Lock()
	id, ok := c.cells[instanceID]
	c.mu.Unlock()
	if !ok {
		// Not launched by this LocalCells (or a launch that failed before
		// answering): find it by cell ID.
		list, err := c.sup.Client().List(ctx, &pluginapi.ListRequest{})
		if err != nil {
			return fmt.Errorf("listing local cells: %w", err)
		}
		for _, in := range list.Instances {
			if in.CellID == instanceID {
				id, ok = in.ID, true
			}
		}
		if !ok {
			return nil
		}
	}
	_, err := c.sup.Client().Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
	if err != nil && !pluginapi.IsNotFound(err) {
		return fmt.Errorf("terminating local cell %s of %s: %w", id, instanceID, err)
	}
	c.mu.Lock()
	delete(c.cells, instanceID)
	c.mu.Unlock()
	c.log.Info("local cell terminated", "instance", instanceID, "local", id)
	// Terminating the cell detached its disks: their links go, as udev's
	// go with the instance.
	return c.forgetDisks(instanceID)
}

// Close terminates the cells still running and stops the local plugin.
func (c *LocalCells) Close() error {
	c.mu.Lock()
	ids := make([]string, 0, len(c.cells))
	for id := range c.cells {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	var errs []error
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), simcells.StopTimeout)
		errs = append(errs, c.Stop(ctx, id))
		cancel()
	}
	errs = append(errs, c.sup.Close(), os.RemoveAll(c.gates), os.RemoveAll(c.diskRoots))
	if c.imdsDir != "" {
		errs = append(errs, os.RemoveAll(c.imdsDir))
	}
	return errors.Join(errs...)
}
