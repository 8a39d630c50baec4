package framework

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
	ec2sim "github.com/kipcell/kip/test/cloudsim/ec2"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/cloudsim/simcells"
	"github.com/kipcell/kip/test/cloudsim/simcells/localcells"
	"github.com/kipcell/kip/test/cloudsim/simknobs"
)

// Sim is what the EC2, Compute Engine and ARM simulators all offer, by
// the same names (simknobs.Knobs, their cells' agents, their boot): a
// test about kip rather than about one cloud drives either through it.
type Sim interface {
	// SilenceAgents makes the next n instances run without their cell
	// agent ever starting.
	SilenceAgents(n int)
	SetBootDelay(d time.Duration)
	InjectFault(f simknobs.Fault)
	ClearFaults()
	Calls() map[string]int
	MaxCallsPerSecond() int
	Throttled() int
	ResetCalls()
}

// Sim is the simulator kip's cloud plugin talks to; nil for the local
// plugin.
func (k *Kip) Sim() Sim {
	switch {
	case k.EC2 != nil:
		return k.EC2
	case k.GCE != nil:
		return k.GCE
	case k.Azure != nil:
		return k.Azure
	}
	return nil
}

// pluginFor is k's plugin.config: opts.Beside's, whose plugin state k
// shares, or that of a plugin started for k (startPlugin).
func (k *Kip) pluginFor(ctx context.Context, opts KipOptions, agent []string, bridge, subnet string) (map[string]any, error) {
	b := opts.Beside
	if b == nil {
		return k.startPlugin(ctx, opts.Plugin, opts.BinDir, agent, bridge, subnet)
	}
	k.beside, k.Plugin, k.StateDir, k.EC2, k.GCE, k.Azure = b, b.Plugin, b.StateDir, b.EC2, b.GCE, b.Azure
	return b.pluginConfig, nil
}

// startPlugin sets k.Plugin and returns its configuration: the local
// plugin's cells on bridge and subnet, or a simulator started for the aws
// or gce plugin whose instances are such cells.
func (k *Kip) startPlugin(ctx context.Context, plugin, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	switch plugin {
	case "", PluginLocal:
		k.Plugin = PluginLocal
		return map[string]any{
			"agentCommand": agent, "network": k.cellNetwork, "bridge": bridge, "subnet": subnet,
			"stateDir": k.StateDir, "terminationGrace": "5s",
		}, nil
	case PluginAWS:
		k.Plugin = PluginAWS
		return k.startEC2(ctx, binDir, agent, bridge, subnet)
	case PluginGCE:
		k.Plugin = PluginGCE
		return k.startGCE(ctx, binDir, agent, bridge, subnet)
	case PluginAzure:
		k.Plugin = PluginAzure
		return k.startAzure(ctx, binDir, agent, bridge, subnet)
	}
	return nil, fmt.Errorf("starting kip: unknown plugin %q (want %s, %s, %s or %s)", plugin, PluginLocal, PluginAWS, PluginGCE, PluginAzure)
}

// startEC2 starts the EC2 simulator for the aws plugin: every instance it
// runs is a real cell of the local plugin (kip-cell on the cells'
// containerd, in its own network namespace on bridge and subnet), booted
// with the bootstrap the aws plugin put in the instance's user data. It
// returns the aws plugin's configuration for the simulator.
func (k *Kip) startEC2(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	// The instance's metadata (the spot interruption notice) at the unix
	// socket the simulator serves for it.
	agent = append(slices.Clone(agent), "--imds-endpoint", "unix://{imds}")
	log, logFile, err := k.startSimCells(ctx, "ec2sim", binDir, agent, bridge, subnet, ec2sim.CellTypes(ec2sim.DefaultInstanceTypes))
	if err != nil {
		return nil, err
	}
	k.EC2 = ec2sim.New(ec2sim.Options{Cells: k.localCells, AccessKeyID: ec2AccessKey, Logger: log.With("component", "ec2sim")})
	url, err := k.EC2.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the EC2 simulator: %w", err)
	}
	// kip checks each cell's signed identity document (served by its
	// instance's metadata) against the simulator's certificate before it
	// signs the cell's certificate.
	identityCert := filepath.Join(k.StateDir, "ec2sim-identity.pem")
	if err := os.WriteFile(identityCert, k.EC2.IdentityCertificatePEM(), 0o600); err != nil {
		_ = k.EC2.Close()
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("writing the simulator's identity certificate: %w", err)
	}
	return map[string]any{
		"region": "us-east-1", "endpointURL": url, "ecrEndpointURL": url,
		"credentials": map[string]any{"accessKeyID": ec2AccessKey, "secretAccessKey": "e2e-secret"},
		"vpcID":       ec2sim.DefaultVPCID,
		"image":       map[string]any{"owner": ec2sim.DebianOwnerID, "name": "debian-12-amd64-*"},
		"identity":    map[string]any{"certificates": identityCert},
	}, nil
}

// startSimCells creates the log of simulator name (<name>.log in k.Dir,
// and the logger writing to it) and starts k.localCells, the local
// plugin's cells its instances run as (agent on bridge and subnet), sized
// as types. The caller closes logFile if it fails later.
func (k *Kip) startSimCells(ctx context.Context, name, binDir string, agent []string, bridge, subnet string,
	types []simcells.InstanceType,
) (log *slog.Logger, logFile *os.File, err error) {
	logFile, err = os.Create(filepath.Join(k.Dir, name+".log"))
	if err != nil {
		return nil, nil, fmt.Errorf("creating the simulator's log: %w", err)
	}
	log = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Each instance's agent looks its disks' paths up under its own disk
	// path root, where the simulator's AttachDisk links them, not in the
	// machine's /dev, which all the cells share (localcells' {disks}).
	agent = append(slices.Clone(agent), "--disk-path-root", "{disks}")
	k.localCells, err = localcells.New(ctx, localcells.Config{
		PluginPath: filepath.Join(binDir, "kip-plugin-local"), AgentCommand: agent, StateDir: k.StateDir, Network: k.cellNetwork,
		// Each instance's metadata also at 169.254.169.254, off the cell,
		// as its cloud serves it (TestPodCannotReachItsInstanceMetadata).
		Metadata:      k.cellNetwork == "netns",
		InstanceTypes: types,
		PluginConfig:  map[string]any{"bridge": bridge, "subnet": subnet, "terminationGrace": "5s"},
		ClusterID:     "e2e-" + name, NodeName: k.NodeName, Logger: log.With("component", "local-cells"),
	})
	if err != nil {
		_ = logFile.Close()
		return nil, nil, fmt.Errorf("starting the simulator's local cells: %w", err)
	}
	return log, logFile, nil
}

// startGCE starts the Compute Engine simulator for the gce plugin: every
// instance it runs is a real cell of the local plugin (kip-cell on the
// cells' containerd, in its own network namespace on bridge and subnet),
// sized as its machine type (gcesim.DefaultMachineTypes) and booted with
// the bootstrap the gce plugin put in the instance's kip-bootstrap
// metadata item. It returns the gce plugin's configuration for the
// simulator: its endpoint, without credentials, the cells' service
// account, and the simulator's keys for their identity tokens.
func (k *Kip) startGCE(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	// The agent joins with the identity token of its instance's metadata
	// server, at the unix socket the simulator serves for it, and reads
	// no EC2 metadata, as deploy/gce/startup.sh runs it.
	agent = append(slices.Clone(agent), "--imds-endpoint", "none", "--gce-metadata-endpoint", "unix://{imds}")
	log, logFile, err := k.startSimCells(ctx, "gcesim", binDir, agent, bridge, subnet, gcesim.CellTypes(gcesim.DefaultMachineTypes))
	if err != nil {
		return nil, err
	}
	// An insert's operation is RUNNING for a moment, as on Compute Engine
	// (never DONE in the insert's answer, which the plugin takes for a
	// replayed insert): the plugin waits for it with zoneOperations.wait.
	k.GCE = gcesim.New(gcesim.Options{Cells: k.localCells, OperationDelay: gceOperationDelay, Logger: log.With("component", "gcesim")})
	url, err := k.GCE.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the Compute Engine simulator: %w", err)
	}
	// kip checks each cell's identity token (which a cell has with a
	// service account) against the simulator's keys before it signs the
	// cell's certificate.
	return map[string]any{
		"project": gcesim.DefaultProject, "region": gcesim.DefaultRegion, "subnetwork": "default",
		"image":    map[string]any{"project": gcesim.DebianProject, "family": "debian-12"},
		"endpoint": url, "withoutAuthentication": true,
		"serviceAccount": GCEServiceAccount,
		"identity":       map[string]any{"certsURL": k.GCE.IdentityCertsURL()},
	}, nil
}

// GCEServiceAccount is the cells' service account in the gce pass.
const GCEServiceAccount = "kip-cell@" + gcesim.DefaultProject + ".iam.gserviceaccount.com"

// gceOperationDelay is how long the Compute Engine simulator's operations
// run before they are DONE.
const gceOperationDelay = 200 * time.Millisecond

// startAzure starts the ARM simulator for the azure plugin: every VM it
// runs is a real cell of the local plugin (kip-cell on the cells'
// containerd, in its own network namespace on bridge and subnet), sized
// as its VM size (azuresim.DefaultSizes) and booted with the bootstrap
// the azure plugin put in the VM's userData. It returns the azure
// plugin's configuration for the simulator: its endpoint, its TLS
// certificate as the CA bundle, without credentials.
func (k *Kip) startAzure(ctx context.Context, binDir string, agent []string, bridge, subnet string) (map[string]any, error) {
	log, logFile, err := k.startSimCells(ctx, "azuresim", binDir, agent, bridge, subnet, azuresim.CellSizes(azuresim.DefaultSizes))
	if err != nil {
		return nil, err
	}
	// A create's allocation is decided a moment after ARM accepted it, as
	// in Azure (where it takes seconds).
	k.Azure = azuresim.New(azuresim.Options{Cells: k.localCells, AllocationDelay: azureAllocationDelay, Logger: log.With("component", "azuresim")})
	url, err := k.Azure.Start()
	if err != nil {
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("starting the ARM simulator: %w", err)
	}
	ca := filepath.Join(k.StateDir, "azuresim-ca.pem")
	if err := os.WriteFile(ca, k.Azure.CACert(), 0o600); err != nil {
		_ = k.Azure.Close()
		_ = k.localCells.Close()
		_ = logFile.Close()
		return nil, fmt.Errorf("writing the ARM simulator's certificate: %w", err)
	}
	return map[string]any{
		"subscriptionID": azuresim.DefaultSubscription, "resourceGroup": azuresim.DefaultResourceGroup,
		"location": azuresim.DefaultLocation,
		"subnetID": k.Azure.SubnetID(azuresim.DefaultSubnets[0]), "networkSecurityGroupID": k.Azure.SecurityGroupID(azuresim.DefaultSecurityGroups[0]),
		"image":    map[string]any{"publisher": "Debian", "offer": "debian-12", "sku": "12-gen2"},
		"endpoint": url, "caBundle": ca, "withoutAuthentication": true,
	}, nil
}

// azureAllocationDelay is how long after its PUT the ARM simulator
// decides a VM's allocation.
const azureAllocationDelay = 200 * time.Millisecond

// ec2AccessKey is the only access key the simulator accepts.
const ec2AccessKey = "AKIDE2ESIMULATOR"

// EC2Client is an EC2 client of the simulator kip's aws plugin talks to,
// with the credentials it accepts, for tests that make what a user makes
// in the region (volumes). Nil outside the aws pass.
func (k *Kip) EC2Client() *ec2.Client {
	if k.EC2 == nil {
		return nil
	}
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(ec2AccessKey, "e2e-secret", ""),
		BaseEndpoint: aws.String(k.EC2.URL()),
	})
}
