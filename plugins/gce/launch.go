package gce

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/gce/catalog"
)

// Launch starts the cell's instance with one instances.insert named after
// the cell ID, in the zone the request prefers, and waits for the insert's
// operation (operations.go), whose error is the launch's: a zone out
// of capacity or a quota fails the operation, not the call.
//
// It is idempotent three ways. The insert's requestId is a UUID derived
// from the cell ID and the offering (zone, type, capacity type), so
// Compute Engine answers a retried insert with the first one's operation
// for as long as it remembers request IDs (at least 60 minutes, its
// documentation says). The instance name is the cell ID, unique in the
// zone: an insert that finds it taken (alreadyExists) answers the existing
// instance when it is this cluster's cell, and refuses otherwise. And an
// instance of the cell the plugin already knows (its view of the cluster,
// after a Terminate or a launch in another zone) is the answer, without an
// insert. An operation already DONE in the insert's answer is a replay (a
// fresh insert is never done at once on Compute Engine): the plugin gets
// the instance, and a cell whose instance is gone is answered terminated,
// so that a Launch of an ended cell starts nothing.
func (p *provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := cfg.plan(req)
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	inst, ok, err := cfg.knownCell(ctx, req.CellID)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		// The insert is idempotent in its zone by itself: go on without
		// the view rather than fail the launch for a listing.
		p.Log.Warn("launching a cell without the view of the cluster (an instance of the cell in another zone is not looked for)", "cell", req.CellID, "error", err)
	case ok:
		p.Log.Info("cell launched before; returning its instance", "cell", req.CellID, "instance", inst.ID, "state", inst.State)
		return &pluginapi.LaunchResponse{Instance: inst}, nil
	}
	op, err := cfg.clients.instances.Insert(ctx, plan.insert)
	if err != nil {
		if isAlreadyExists(err) {
			return p.existing(ctx, cfg, plan, false)
		}
		// The instance may exist even so (the answer was lost): the next
		// List must ask Compute Engine rather than trust the snapshot.
		cfg.view.Uncertain()
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, mapLaunchError(err, req.InstanceType, plan.zone, plan.capacity))
	}
	done := op.Proto()
	replay := done.GetStatus() == computepb.Operation_DONE
	if !replay {
		if done, err = p.wait(ctx, cfg, plan.zone, done.GetName()); err != nil {
			cfg.view.Uncertain()
			return nil, fmt.Errorf("launching cell %s: waiting for the insert: %w", req.CellID, mapError("zoneOperations.wait", err))
		}
	}
	if err := opError("instances.insert", done); err != nil {
		if isAlreadyExists(err) {
			return p.existing(ctx, cfg, plan, false)
		}
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, mapLaunchError(err, req.InstanceType, plan.zone, plan.capacity))
	}
	if replay {
		return p.existing(ctx, cfg, plan, true)
	}
	inst = plan.instance(p.Now())
	cfg.view.Launched(inst.ID, gceInstance{Instance: inst, spot: plan.capacity == pluginapi.CapacitySpot})
	p.Log.Info("cell launched", "cell", req.CellID, "instance", inst.ID, "type", req.InstanceType,
		"zone", plan.zone, "capacity_type", plan.capacity)
	return &pluginapi.LaunchResponse{Instance: inst}, nil
}

// existing answers a launch whose instance Compute Engine already has
// (alreadyExists, or a replayed insert): instances.get, refusing another
// cluster's instance of that name. A replayed insert whose instance is
// gone launched the cell before and the instance has ended: the answer is
// that instance, terminated.
func (p *provider) existing(ctx context.Context, cfg *config, plan *launchPlan, replay bool) (*pluginapi.LaunchResponse, error) {
	cell := plan.cellID
	got, err := cfg.clients.instances.Get(ctx, &computepb.GetInstanceRequest{Project: cfg.project, Zone: plan.zone, Instance: cell})
	if err != nil {
		if isNotFound(err) && replay {
			inst := plan.instance(p.Now())
			inst.State, inst.StateReason = pluginapi.StateTerminated, "the cell's instance was launched before and has been deleted"
			p.Log.Info("cell launched before and its instance is gone", "cell", cell, "instance", inst.ID)
			return &pluginapi.LaunchResponse{Instance: inst}, nil
		}
		if isNotFound(err) {
			// Taken a moment ago and gone now (it was being deleted): a
			// retry inserts it.
			return nil, pluginapi.NewTransient("launching cell %s: instance %s in zone %s existed and is gone now", cell, cell, plan.zone)
		}
		return nil, fmt.Errorf("launching cell %s: getting its existing instance: %w", cell, mapError("instances.get", err))
	}
	gi := instanceFromGCE(got)
	if c := gi.Tags[pluginapi.TagCluster]; c != cfg.clusterID {
		return nil, fmt.Errorf("launching cell %s: zone %s already has an instance named %s, of cluster %q, not this cluster's %q; cell IDs must be unique in the project and zone",
			cell, plan.zone, cell, c, cfg.clusterID)
	}
	cfg.view.Launched(gi.ID, gi)
	p.Log.Info("cell launched before; returning its instance", "cell", cell, "instance", gi.ID, "state", gi.State)
	return &pluginapi.LaunchResponse{Instance: gi.Instance}, nil
}

// knownCell returns the cell's instance when the plugin's view of the
// cluster knows one (in any zone): a cell launched before, or terminated.
// The view is refreshed only when it has never been fetched or a launch's
// outcome was unknown since.
func (cfg *config) knownCell(ctx context.Context, cell string) (pluginapi.Instance, bool, error) {
	snap, err := cfg.view.Get(ctx, anyAge)
	if err != nil {
		return pluginapi.Instance{}, false, err
	}
	for _, gi := range snap {
		if gi.CellID == cell {
			return gi.Instance, true, nil
		}
	}
	return pluginapi.Instance{}, false, nil
}

// anyAge accepts a snapshot of any age.
const anyAge = 100 * 365 * 24 * time.Hour

// launchPlan is an instances.insert call and what it was made of.
type launchPlan struct {
	insert   *computepb.InsertInstanceRequest
	cellID   string
	zone     string
	capacity pluginapi.CapacityType
	tags     map[string]string
	spec     string // the machine type
}

// instance is the plan's instance as Launch answers it before Compute
// Engine shows it: pending, no address yet.
func (pl *launchPlan) instance(now time.Time) pluginapi.Instance {
	return pluginapi.Instance{
		ID: instanceID(pl.zone, pl.cellID), CellID: pl.cellID, InstanceType: pl.spec, Zone: pl.zone,
		CapacityType: pl.capacity, State: pluginapi.StatePending, Tags: pl.tags, LaunchedAt: now,
	}
}

// bundledGPUs are the families whose machine types come with their GPUs
// (A2, A3, A4, G2): they take no guestAccelerators.
var bundledGPUs = []string{"a2", "a3", "a4", "g2"}

// plan turns a launch request into an instances.insert call. It is pure:
// the same request and configuration give the same call, which a retry
// under the same requestId needs.
func (cfg *config) plan(req *pluginapi.LaunchRequest) (*launchPlan, error) {
	capacity, err := req.Capacity()
	if err != nil {
		return nil, err
	}
	if !nameRE.MatchString(req.CellID) {
		return nil, fmt.Errorf("cell ID %q is not a Compute Engine instance name (a lowercase letter, then at most 62 lowercase letters, digits and hyphens, not ending with a hyphen)", req.CellID)
	}
	if len(req.SecurityGroups) > 0 {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldSecurityGroups, "the gce plugin has no security groups: firewall rules follow networkTags")
	}
	if req.InstanceProfile != "" {
		return nil, pluginapi.NewUnsupportedField(pluginapi.FieldInstanceProfile, "the gce plugin has no instance profiles: the cells' service account is serviceAccount")
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	spec, known := cat.Type(req.InstanceType)

	image := cfg.imageURL
	if req.Image != "" {
		if image, err = requestedImage(cfg.project, req.Image); err != nil {
			return nil, err
		}
	} else if known && cfg.imageArch != "" && pluginapi.Arch(spec.Arch) != cfg.imageArch {
		return nil, pluginapi.NewInvalidConfig("image", "image %s is %s; machine type %s is %s", cfg.imageURL, cfg.imageArch, req.InstanceType, spec.Arch)
	}
	zone, err := cfg.placement(req, capacity)
	if err != nil {
		return nil, err
	}

	tags := pluginapi.StandardTags(cfg.clusterID, req)
	labels := cfg.labelsFor(tags)
	items := []*computepb.Items{
		{Key: proto.String(metadataBootstrap), Value: proto.String(string(req.Bootstrap))},
		{Key: proto.String(metadataTags), Value: proto.String(encodeTags(tags))},
	}
	if cfg.startupScript != nil {
		items = append(items, &computepb.Items{Key: proto.String(metadataStartup), Value: proto.String(string(cfg.startupScript))})
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.metadata)) {
		items = append(items, &computepb.Items{Key: proto.String(k), Value: proto.String(cfg.metadata[k])})
	}
	size := 0
	for _, it := range items {
		size += len(it.GetKey()) + len(it.GetValue())
	}
	if size > maxMetadata {
		return nil, pluginapi.NewInvalidConfig("startupScript", "the metadata (startup script, bootstrap, tags) is %d bytes; Compute Engine takes at most %d", size, maxMetadata)
	}

	disk := &computepb.AttachedDiskInitializeParams{
		SourceImage: proto.String(image),
		DiskType:    proto.String(fmt.Sprintf("zones/%s/diskTypes/%s", zone, cfg.diskType)),
		Labels:      labels,
	}
	if gb := cmp.Or(int64(req.VolumeSizeGiB), cfg.diskSizeGB); gb > 0 {
		disk.DiskSizeGb = proto.Int64(gb)
	}
	inst := &computepb.Instance{
		Name:        proto.String(req.CellID),
		MachineType: proto.String(fmt.Sprintf("zones/%s/machineTypes/%s", zone, req.InstanceType)),
		Labels:      labels,
		Metadata:    &computepb.Metadata{Items: items},
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true), Type: proto.String("PERSISTENT"),
			InitializeParams: disk,
		}},
		// No access config: cells have no external address (Cloud NAT
		// gives them the internet; deploy/gce/README.md). One alias IP
		// of the subnetwork's primary range ("/32": Compute Engine
		// picks it) is the pod's own address (pluginapi.AddressPod): the
		// agent gives it to the pod's network namespace, so that a pod
		// never shares the instance's network; the VPC routes it to the
		// instance and lets it out, as GKE's VPC-native pod ranges.
		NetworkInterfaces: []*computepb.NetworkInterface{{
			Subnetwork:    proto.String(cfg.subnetworkURL),
			AliasIpRanges: []*computepb.AliasIpRange{{IpCidrRange: proto.String("/32")}},
		}},
		Scheduling: &computepb.Scheduling{ProvisioningModel: proto.String("STANDARD")},
	}
	if len(cfg.networkTags) > 0 {
		inst.Tags = &computepb.Tags{Items: slices.Clone(cfg.networkTags)}
	}
	if cfg.serviceAccount != "" {
		inst.ServiceAccounts = []*computepb.ServiceAccount{{Email: proto.String(cfg.serviceAccount), Scopes: slices.Clone(cfg.scopes)}}
	}
	gpu := known && spec.GPU != nil && spec.GPU.Count > 0
	if gpu && !slices.Contains(bundledGPUs, family(req.InstanceType)) {
		inst.GuestAccelerators = []*computepb.AcceleratorConfig{{
			AcceleratorType:  proto.String(fmt.Sprintf("zones/%s/acceleratorTypes/%s", zone, acceleratorName(spec.GPU.Kind))),
			AcceleratorCount: proto.Int32(spec.GPU.Count),
		}}
	}
	if gpu {
		// A VM with GPUs cannot live-migrate.
		inst.Scheduling.OnHostMaintenance = proto.String("TERMINATE")
	}
	if capacity == pluginapi.CapacitySpot {
		// A preempted cell is gone: deleted, not stopped (a stopped
		// instance keeps its disk, billed, and its name).
		inst.Scheduling.ProvisioningModel = proto.String("SPOT")
		inst.Scheduling.InstanceTerminationAction = proto.String("DELETE")
		inst.Scheduling.OnHostMaintenance = proto.String("TERMINATE")
		inst.Scheduling.AutomaticRestart = proto.Bool(false)
	}
	return &launchPlan{
		insert: &computepb.InsertInstanceRequest{
			Project: cfg.project, Zone: zone, InstanceResource: inst,
			RequestId: proto.String(requestID("instances.insert", cfg.project, zone, req.CellID, req.InstanceType, string(capacity))),
		},
		cellID: req.CellID, zone: zone, capacity: capacity, tags: tags, spec: req.InstanceType,
	}, nil
}

// imageRE is an image as instances.insert takes it: a URL or partial URL
// of an image or image family.
var imageRE = regexp.MustCompile(`^(https://[a-z.]+/compute/v1/)?(projects/[^/]+/)?global/images/(family/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// requestedImage is the sourceImage of a request's image: an image name
// (in the cells' project), or an image's or family's URL.
func requestedImage(project, image string) (string, error) {
	switch {
	case nameRE.MatchString(image):
		return fmt.Sprintf("projects/%s/global/images/%s", project, image), nil
	case imageRE.MatchString(image):
		return image, nil
	}
	return "", pluginapi.NewInvalidConfig("image", "the requested image %q is neither an image name nor an image URL such as projects/debian-cloud/global/images/family/debian-12", image)
}

// acceleratorName is Compute Engine's accelerator type of a catalog GPU
// kind: t4 → nvidia-tesla-t4, l4 → nvidia-l4, a100-80gb → nvidia-a100-80gb.
func acceleratorName(kind string) string {
	switch kind {
	case "k80", "p4", "p100", "v100", "t4", "a100":
		return "nvidia-tesla-" + kind
	}
	return "nvidia-" + kind
}

// requestID is a name-based UUID (version 5 layout, SHA-256) of parts: the
// same parts give the same requestId, so Compute Engine recognises a
// retried call.
func requestID(parts ...string) string {
	sum := sha256.Sum256([]byte("kip\x00" + strings.Join(parts, "\x00")))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x50
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// placement picks the zone: the first of req.Zones that is configured, or,
// when the request names no zone, one derived from the cell ID (the same
// every retry, spread over the zones).
func (cfg *config) placement(req *pluginapi.LaunchRequest, capacity pluginapi.CapacityType) (string, error) {
	if len(req.Zones) == 0 {
		h := fnv.New32a()
		h.Write([]byte(req.CellID))
		return cfg.zones[int(h.Sum32()%uint32(len(cfg.zones)))], nil
	}
	for _, z := range req.Zones {
		if slices.Contains(cfg.zones, z) {
			return z, nil
		}
	}
	return "", pluginapi.NewInsufficientCapacity(req.InstanceType, req.Zones[0], capacity,
		fmt.Sprintf("zone %s is not configured (zones: %s)", strings.Join(req.Zones, ", "), strings.Join(cfg.zones, ", ")))
}

// instanceID is the contract's ID of an instance: zone/name, since
// Compute Engine names an instance within its zone.
func instanceID(zone, name string) string { return zone + "/" + name }

// parseID splits an instance ID; ok is false for an ID of another shape.
func parseID(id string) (zone, name string, ok bool) {
	zone, name, ok = strings.Cut(id, "/")
	return zone, name, ok && zone != "" && nameRE.MatchString(name) && !strings.Contains(name, "/")
}

// last is the last segment of a resource URL (zones/us-central1-a → the
// zone).
func last(url string) string { return path.Base(url) }
