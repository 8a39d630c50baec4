package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kipcell/kip/test/images"
)

// MetricsServerManifest is metrics-server's manifest, relative to the
// repository root: upstream's release with the Kip node's flags, in
// kube-system, serving metrics.k8s.io/v1beta1, on a kubelet node.
const MetricsServerManifest = "deploy/metrics-server/metrics-server.yaml"

// MetricsAPIService is the APIService metrics-server serves.
const MetricsAPIService = "v1beta1.metrics.k8s.io"

// MetricsServer is metrics-server deployed from MetricsServerManifest.
type MetricsServer struct {
	// Image is the metrics-server image in the cells' registry.
	Image images.Image
	// Manifest is what was applied: MetricsServerManifest with the
	// cells' registry.
	Manifest []byte
}

// ApplyMetricsServer builds metrics-server (cached,
// images.BuildMetricsServer), pushes it to the cells' registry and applies
// MetricsServerManifest for that registry, placed as p says (the zero
// Placement: where its scheduling puts it, a kubelet node), with kubectl
// as cluster-admin. It does not wait: DeployMetricsServer does.
func (f *Framework) ApplyMetricsServer(ctx context.Context, cells *Cells, p Placement, log io.Writer) (*MetricsServer, error) {
	manifest, err := readManifest(MetricsServerManifest)
	if err != nil {
		return nil, err
	}
	bin, err := images.BuildMetricsServer(ctx, images.BuildOptions{Log: log})
	if err != nil {
		return nil, fmt.Errorf("building metrics-server: %w", err)
	}
	img, err := images.PushMetricsServer(ctx, cells.Registry, bin)
	if err != nil {
		return nil, err
	}
	rendered, err := place([]byte(strings.ReplaceAll(string(manifest), RegistryVar, cells.Registry.Host())), p)
	if err != nil {
		return nil, fmt.Errorf("placing %s: %w", MetricsServerManifest, err)
	}
	if err := f.kubectl(ctx, rendered, "apply", "-f", "-"); err != nil {
		return nil, fmt.Errorf("applying %s: %w", MetricsServerManifest, err)
	}
	return &MetricsServer{Image: img, Manifest: rendered}, nil
}

// DeployMetricsServer is ApplyMetricsServer, then waits until the API
// server reports MetricsAPIService Available: metrics-server runs, is
// Ready, and the API server reaches it.
func (f *Framework) DeployMetricsServer(ctx context.Context, cells *Cells, p Placement, log io.Writer) (*MetricsServer, error) {
	ms, err := f.ApplyMetricsServer(ctx, cells, p, log)
	if err != nil {
		return nil, err
	}
	var last string
	err = Poll(ctx, 4*time.Minute, func(ctx context.Context) (bool, error) {
		raw, err := f.Client.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/" + MetricsAPIService).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		var svc struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &svc); err != nil {
			return false, fmt.Errorf("reading APIService %s: %w", MetricsAPIService, err)
		}
		for _, c := range svc.Status.Conditions {
			if c.Type == "Available" {
				last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for APIService %s to be Available: %w (last: %s)", MetricsAPIService, err, last)
	}
	return ms, nil
}

// Delete deletes what ApplyMetricsServer applied and waits until it is
// gone.
func (m *MetricsServer) Delete(ctx context.Context, f *Framework) error {
	if err := f.kubectl(ctx, m.Manifest, "delete", "--ignore-not-found", "--wait=true", "--timeout=60s", "-f", "-"); err != nil {
		return fmt.Errorf("deleting metrics-server: %w", err)
	}
	return nil
}
