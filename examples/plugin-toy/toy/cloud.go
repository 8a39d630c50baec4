package toy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/userdata"
)

// record is one instance of the toy cloud, the file <dir>/<ID>.json.
type record struct {
	ID           string            `json:"id"`
	CellID       string            `json:"cellID"`
	InstanceType string            `json:"instanceType"`
	Address      string            `json:"address"`
	Tags         map[string]string `json:"tags"`
	LaunchedAt   time.Time         `json:"launchedAt"`
	Terminated   bool              `json:"terminated,omitempty"`
	// UserData is what a cloud hands the instance at boot: the cell's
	// bootstrap in the MIME format of pluginapi/userdata.
	UserData []byte `json:"userData,omitempty"`
}

// Launch creates the cell's instance, or answers with the one an earlier
// Launch of the same cell created, terminated or not: the instance ID is
// derived from the cluster and cell IDs, and the file is created only if
// it is absent.
func (p *provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	// Spot, security groups, instance profiles and volume sizes need
	// capabilities the toy does not report: Serve refuses them for it.
	switch {
	case !slices.ContainsFunc(catalog, func(t pluginapi.InstanceType) bool { return t.Name == req.InstanceType }):
		return nil, fmt.Errorf("launching cell %s: instance type %q is not in the toy catalog", req.CellID, req.InstanceType)
	case len(req.Zones) > 0 && !slices.Contains(req.Zones, zone):
		return nil, pluginapi.NewInsufficientCapacity(req.InstanceType, req.Zones[0], pluginapi.CapacityOnDemand, "the toy cloud has only zone "+zone)
	}
	ud, err := userdata.Build(nil, req.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	id := instanceID(cfg.clusterID, req.CellID)
	r := record{
		ID: id, CellID: req.CellID, InstanceType: req.InstanceType, Address: address(id),
		Tags: pluginapi.StandardTags(cfg.clusterID, req), LaunchedAt: time.Now().UTC(), UserData: ud,
	}
	err = cfg.write(r, os.Link) // fails with fs.ErrExist if the cell was launched before
	if errors.Is(err, fs.ErrExist) {
		r, err = cfg.read(id)
	}
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	p.log.Info("launched", "cell", req.CellID, "instance", r.ID, "type", r.InstanceType)
	return &pluginapi.LaunchResponse{Instance: cfg.instance(r)}, nil
}

// Describe answers with the named instances of this cluster that exist;
// it leaves out the others, terminated ones included.
func (p *provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	resp := &pluginapi.DescribeResponse{}
	for _, id := range req.IDs {
		r, err := cfg.find(id)
		switch {
		case pluginapi.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("describing instance %s: %w", id, err)
		default:
			resp.Instances = append(resp.Instances, cfg.instance(r))
		}
	}
	return resp, nil
}

// List answers with every instance of this cluster but the terminated.
func (p *provider) List(ctx context.Context, _ *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(cfg.dir, "toy-*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	resp := &pluginapi.ListResponse{}
	for _, path := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := cfg.find(strings.TrimSuffix(filepath.Base(path), ".json"))
		switch {
		case pluginapi.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("listing instances: %w", err)
		default:
			resp.Instances = append(resp.Instances, cfg.instance(r))
		}
	}
	return resp, nil
}

// Terminate marks the instance terminated. Then it is gone: Describe and
// List leave it out and a second Terminate answers NotFound, as for an
// instance that never existed or is another cluster's. Its file stays, so
// that a Launch of its cell answers with it rather than start another.
func (p *provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	r, err := cfg.find(req.ID)
	if err != nil {
		return nil, fmt.Errorf("terminating instance %s: %w", req.ID, err)
	}
	r.Terminated = true
	if err := cfg.write(r, os.Rename); err != nil {
		return nil, fmt.Errorf("terminating instance %s: %w", req.ID, err)
	}
	p.log.Info("terminated", "cell", r.CellID, "instance", r.ID)
	return &pluginapi.TerminateResponse{Instance: cfg.instance(r)}, nil
}

// instance is what the cloud says about r now.
func (c *config) instance(r record) pluginapi.Instance {
	inst := pluginapi.Instance{
		ID: r.ID, CellID: r.CellID, InstanceType: r.InstanceType, CapacityType: pluginapi.CapacityOnDemand,
		Zone: zone, State: pluginapi.StateRunning, Tags: r.Tags, LaunchedAt: r.LaunchedAt,
	}
	switch {
	case r.Terminated: // only Launch and Terminate answer with it
		inst.State = pluginapi.StateTerminated
	case time.Since(r.LaunchedAt) < c.boot:
		inst.State = pluginapi.StatePending
	default:
		// Running: the host dials the cell agent at this address.
		inst.Addresses = []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: r.Address}}
	}
	return inst
}

var idPattern = regexp.MustCompile(`^toy-[0-9a-f]{16}$`)

// instanceID names the instance of a cell: the same cell of the same
// cluster always gets the same ID.
func instanceID(clusterID, cellID string) string {
	sum := sha256.Sum256([]byte(clusterID + "/" + cellID))
	return "toy-" + hex.EncodeToString(sum[:8])
}

// address is the instance's private address, in 10.99.0.0/16.
func address(id string) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("10.99.%d.%d", sum[0], sum[1])
}

// find reads this cluster's instance id; NotFound if there is none or it
// is terminated.
func (c *config) find(id string) (record, error) {
	if !idPattern.MatchString(id) {
		return record{}, pluginapi.NewNotFound("instance %s: not a toy instance ID", id)
	}
	r, err := c.read(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return record{}, pluginapi.NewNotFound("instance %s does not exist", id)
	case err != nil:
		return record{}, err
	case r.Tags[pluginapi.TagCluster] != c.clusterID:
		return record{}, pluginapi.NewNotFound("instance %s is not of cluster %s", id, c.clusterID)
	case r.Terminated:
		return record{}, pluginapi.NewNotFound("instance %s is terminated", id)
	}
	return r, nil
}

func (c *config) read(id string) (record, error) {
	var r record
	data, err := os.ReadFile(filepath.Join(c.dir, id+".json"))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("reading instance %s: %w", id, err)
	}
	return r, nil
}

// write puts r's file in place whole (writeWhole), with os.Link to
// create it only if it is absent, os.Rename to replace it.
func (c *config) write(r record, place func(oldpath, newpath string) error) error {
	return writeWhole(r, filepath.Join(c.dir, r.ID+".json"), place)
}

// writeWhole puts v, as JSON, at path whole: written to a temporary file
// in path's directory, then moved there with place. No reader ever sees
// half a file.
func writeWhole(v any, path string, place func(oldpath, newpath string) error) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone already after a rename
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return place(tmp.Name(), path)
}
