package gce

import (
	"errors"
	"slices"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

// kind names the contract kind of err, for table tests.
func kind(err error) string {
	switch {
	case err == nil:
		return "nil"
	case pluginapi.IsInsufficientCapacity(err):
		return "InsufficientCapacity"
	case pluginapi.IsQuotaExceeded(err):
		return "QuotaExceeded"
	case pluginapi.IsThrottled(err):
		return "Throttled"
	case pluginapi.IsNotFound(err):
		return "NotFound"
	case pluginapi.IsInvalidConfig(err):
		return "InvalidConfig"
	case pluginapi.IsUnsupported(err):
		return "Unsupported"
	case pluginapi.IsTransient(err):
		return "Transient"
	}
	return "other"
}

// launchErrorCase is a refusal of a launch as Compute Engine sends it and
// the kind it maps to.
type launchErrorCase struct {
	name     string
	typ      string
	capacity pluginapi.CapacityType
	inject   func(f *fakeCompute)
	kind     string
	key      string // InvalidConfig key or Unsupported field
	check    func(t *testing.T, err error)
}

var launchErrorCases = []launchErrorCase{
	{name: "ZONE_RESOURCE_POOL_EXHAUSTED without httpErrorStatusCode", kind: "InsufficientCapacity",
		inject: func(f *fakeCompute) {
			f.failOp("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'projects/kip-test/zones/us-central1-a' does not have enough resources available to fulfill the request.", "", 0, 1)
		},
		check: func(t *testing.T, err error) {
			var ic *pluginapi.InsufficientCapacityError
			if !errors.As(err, &ic) || ic.InstanceType != "e2-small" || ic.Zone != "us-central1-a" || ic.CapacityType != pluginapi.CapacityOnDemand {
				t.Errorf("capacity error %+v: want the offering", ic)
			}
		}},
	{name: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS with 503", kind: "InsufficientCapacity",
		inject: func(f *fakeCompute) {
			f.failOp("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "The zone does not have enough resources available to fulfill the request. '(resource type:compute)'.", "", 503, 1)
		}},
	{name: "STOCKOUT", kind: "InsufficientCapacity", capacity: pluginapi.CapacitySpot,
		inject: func(f *fakeCompute) { f.failOp("STOCKOUT", "stockout", "", 0, 1) },
		check: func(t *testing.T, err error) {
			var ic *pluginapi.InsufficientCapacityError
			if !errors.As(err, &ic) || ic.CapacityType != pluginapi.CapacitySpot {
				t.Errorf("capacity error %+v: want spot", ic)
			}
		}},
	{name: "QUOTA_EXCEEDED CPUS", kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failOp("QUOTA_EXCEEDED", "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.", "CPUS", 403, 1)
		},
		check: func(t *testing.T, err error) {
			var q *pluginapi.QuotaExceededError
			errors.As(err, &q)
			if q.CapacityType != pluginapi.CapacityOnDemand || !q.Covers("e2-medium", pluginapi.CapacityOnDemand) || !q.Covers("n1-standard-1", pluginapi.CapacityOnDemand) ||
				q.Covers("n2-standard-2", pluginapi.CapacityOnDemand) || q.Covers("e2-medium", pluginapi.CapacitySpot) {
				t.Errorf("CPUS covers %d types, %q; want E2 and N1 on-demand, not N2", len(q.InstanceTypes), q.CapacityType)
			}
		}},
	{name: "QUOTA_EXCEEDED N2_CPUS from the message", typ: "n2-standard-2", kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failOp("QUOTA_EXCEEDED", "Quota 'N2_CPUS' exceeded.  Limit: 8.0 in region us-central1.", "", 0, 1)
		},
		check: func(t *testing.T, err error) {
			var q *pluginapi.QuotaExceededError
			errors.As(err, &q)
			if !q.Covers("n2-highmem-4", pluginapi.CapacityOnDemand) || q.Covers("e2-small", pluginapi.CapacityOnDemand) {
				t.Errorf("N2_CPUS covers %v", q.InstanceTypes)
			}
		}},
	spotQuotaCase("PREEMPTIBLE_CPUS"),
	// As Compute Engine writes the detail: the service's metric name.
	spotQuotaCase("compute.googleapis.com/preemptible_cpus"),
	{name: "QUOTA_EXCEEDED NVIDIA_L4_GPUS", typ: "g2-standard-4", kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failOp("QUOTA_EXCEEDED", "Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region us-central1.", "NVIDIA_L4_GPUS", 0, 1)
		},
		check: func(t *testing.T, err error) {
			var q *pluginapi.QuotaExceededError
			errors.As(err, &q)
			if !q.Covers("g2-standard-8", pluginapi.CapacityOnDemand) || q.Covers("e2-small", pluginapi.CapacityOnDemand) || q.Covers("a2-highgpu-1g", pluginapi.CapacityOnDemand) {
				t.Errorf("NVIDIA_L4_GPUS covers %v", q.InstanceTypes)
			}
		}},
	{name: "QUOTA_EXCEEDED other metric is unscoped", kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failOp("QUOTA_EXCEEDED", "Quota 'SSD_TOTAL_GB' exceeded.  Limit: 500.0 in region us-central1.", "SSD_TOTAL_GB", 0, 1)
		},
		check: func(t *testing.T, err error) {
			var q *pluginapi.QuotaExceededError
			if errors.As(err, &q); q.Scoped() {
				t.Errorf("SSD_TOTAL_GB scoped to %v %q", q.InstanceTypes, q.CapacityType)
			}
		}},
	{name: "403 quotaExceeded on the call", kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 403, "quotaExceeded", "Quota 'INSTANCES' exceeded.  Limit: 10.0 in region us-central1.", 1)
		}},
	{name: "403 rateLimitExceeded", kind: "Throttled",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 403, "rateLimitExceeded", "Rate Limit Exceeded", 1)
		}},
	{name: "429", kind: "Throttled",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 429, "RESOURCE_EXHAUSTED", "too many requests", 1)
		}},
	{name: "operation RATE_LIMIT_EXCEEDED", kind: "Throttled",
		inject: func(f *fakeCompute) { f.failOp("RATE_LIMIT_EXCEEDED", "rate", "", 0, 1) }},
	{name: "400 machine type not in zone", kind: "InsufficientCapacity",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 400, "invalid", "Invalid value for field 'resource.machineType': 'zones/us-central1-a/machineTypes/e2-small'. Machine type with name 'e2-small' does not exist in zone 'us-central1-a'.", 1)
		}},
	{name: "404 image", kind: "InvalidConfig", key: "image",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 404, "notFound", "The resource 'projects/kip-test/global/images/kip-cell-1' was not found", 1)
		}},
	{name: "operation RESOURCE_NOT_FOUND subnetwork", kind: "InvalidConfig", key: "subnetwork",
		inject: func(f *fakeCompute) {
			f.failOp("RESOURCE_NOT_FOUND", "The resource 'projects/kip-test/regions/us-central1/subnetworks/cells' was not found", "", 0, 1)
		}},
	{name: "400 service account", kind: "InvalidConfig", key: "serviceAccount",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 400, "invalid", "Invalid value for field 'resource.serviceAccounts[0].email': 'x'. The user does not have access to service account 'x'.", 1)
		}},
	{name: "400 disk size", kind: "Unsupported", key: pluginapi.FieldVolumeSizeGiB,
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 400, "invalid", "Invalid value for field 'resource.disks[0].initializeParams.diskSizeGb': '5'. Requested disk size cannot be smaller than the image size (10 GB)", 1)
		}},
	{name: "503", kind: "Transient",
		inject: func(f *fakeCompute) { f.failHTTP("instances.insert", 503, "backendError", "Backend Error", 1) }},
	{name: "403 forbidden", kind: "other",
		inject: func(f *fakeCompute) {
			f.failHTTP("instances.insert", 403, "forbidden", "Required 'compute.instances.create' permission for 'projects/kip-test/zones/us-central1-a/instances/kip-err'", 1)
		}},
	{name: "401", kind: "InvalidConfig", key: "credentialsFile",
		inject: func(f *fakeCompute) { f.failHTTP("instances.insert", 401, "authError", "Invalid Credentials", 1) }},
}

// spotQuotaCase is a refused Spot insert whose quotaInfo names the
// region's PREEMPTIBLE_CPUS quota by metric: it covers every spot
// offering.
func spotQuotaCase(metric string) launchErrorCase {
	return launchErrorCase{name: "QUOTA_EXCEEDED " + metric, capacity: pluginapi.CapacitySpot, kind: "QuotaExceeded",
		inject: func(f *fakeCompute) {
			f.failOp("QUOTA_EXCEEDED", "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 0.0 in region us-central1.", metric, 0, 1)
		},
		check: func(t *testing.T, err error) {
			var q *pluginapi.QuotaExceededError
			errors.As(err, &q)
			if q.CapacityType != pluginapi.CapacitySpot || len(q.InstanceTypes) != 0 {
				t.Errorf("%s = %v %q, want every spot offering", metric, q.InstanceTypes, q.CapacityType)
			}
		}}
}

// Every refusal of a launch as Compute Engine sends it, as an HTTP error
// or as a failed operation (with and without httpErrorStatusCode), maps to
// its kind; capacity names the offering, quotas their scope, invalid
// fields the configuration key or request field.
func TestLaunchErrors(t *testing.T) {
	for _, tc := range launchErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCompute(t)
			p := configured(t, testConfig(f))
			tc.inject(f)
			req := launchRequest("kip-err")
			if tc.typ != "" {
				req.InstanceType = tc.typ
			}
			if tc.capacity != "" {
				req.CapacityType = tc.capacity
			}
			_, err := p.Launch(t.Context(), req)
			if got := kind(err); got != tc.kind {
				t.Fatalf("Launch = %v (%s), want %s", err, got, tc.kind)
			}
			var ic *pluginapi.InvalidConfigError
			var un *pluginapi.UnsupportedError
			switch {
			case errors.As(err, &ic) && ic.Key != tc.key:
				t.Errorf("InvalidConfig key %q, want %q", ic.Key, tc.key)
			case errors.As(err, &un) && un.Field != tc.key:
				t.Errorf("Unsupported field %q, want %q", un.Field, tc.key)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			f.mu.Lock()
			n := len(f.instances)
			f.mu.Unlock()
			if n != 0 {
				t.Errorf("a refused launch left %d instances", n)
			}
		})
	}
}

// The quota metrics' scopes, table by table.
func TestQuotaScope(t *testing.T) {
	for _, tc := range []struct {
		metric, typ string
		capacity    pluginapi.CapacityType
		wantCT      pluginapi.CapacityType
		covers      []string
		notCovers   []string
		scoped      bool
	}{
		{"CPUS", "e2-small", "on-demand", "on-demand", []string{"e2-small", "n1-standard-1", "custom-2-4096", "f1-micro"}, []string{"n2-standard-2", "c3-standard-4"}, true},
		{"N2D_CPUS", "n2d-standard-2", "spot", "spot", []string{"n2d-standard-4", "n2d-custom-2-4096"}, []string{"n2-standard-2"}, true},
		{"PREEMPTIBLE_CPUS", "e2-small", "spot", "spot", nil, nil, true},
		{"PREEMPTIBLE_NVIDIA_L4_GPUS", "g2-standard-4", "spot", "spot", []string{"g2-standard-8"}, []string{"e2-small"}, true},
		{"GPUS_ALL_REGIONS", "g2-standard-4", "on-demand", "", []string{"g2-standard-8", "a2-highgpu-1g"}, []string{"e2-small"}, true},
		{"INSTANCES", "e2-small", "on-demand", "on-demand", nil, nil, true},
		{"CPUS_ALL_REGIONS", "e2-small", "on-demand", "", nil, nil, false},
		{"", "e2-small", "on-demand", "", nil, nil, false},
	} {
		types, ct, scoped := quotaScope(tc.metric, tc.typ, tc.capacity)
		if scoped != tc.scoped || ct != tc.wantCT {
			t.Errorf("%s: scoped %v capacity %q, want %v %q", tc.metric, scoped, ct, tc.scoped, tc.wantCT)
		}
		for _, c := range tc.covers {
			if !slices.Contains(types, c) {
				t.Errorf("%s does not cover %s", tc.metric, c)
			}
		}
		for _, c := range tc.notCovers {
			if slices.Contains(types, c) {
				t.Errorf("%s covers %s", tc.metric, c)
			}
		}
	}
}

// Errors of calls other than the insert.
func TestMapError(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	p.SnapshotAge = 0
	for _, tc := range []struct {
		status int
		reason string
		kind   string
	}{
		{403, "rateLimitExceeded", "Throttled"}, {403, "userRateLimitExceeded", "Throttled"}, {429, "", "Throttled"},
		{500, "internalError", "Transient"}, {503, "backendError", "Transient"}, {400, "invalid", "other"},
	} {
		f.failHTTP("instances.aggregatedList", tc.status, tc.reason, "injected", 1)
		_, err := p.List(ctx, &pluginapi.ListRequest{})
		if got := kind(err); got != tc.kind {
			t.Errorf("%d %s: List = %v (%s), want %s", tc.status, tc.reason, err, got, tc.kind)
		}
	}
}
