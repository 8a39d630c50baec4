package gce

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
)

// TestSDKReachesALocalEndpoint pins the SDK this module is built with: the
// REST client, given an endpoint and no credentials, sends instances.get
// where the plugin's tests will run the simulator, and decodes its answer.
func TestSDKReachesALocalEndpoint(t *testing.T) {
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.Method + " " + r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "cell-1", "id": "42", "status": "RUNNING"})
	}))
	defer srv.Close()
	ctx := t.Context()
	c, err := compute.NewInstancesRESTClient(ctx, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("creating the client: %v", err)
	}
	defer func() { _ = c.Close() }()
	in, err := c.Get(ctx, &computepb.GetInstanceRequest{Project: "p", Zone: "us-central1-a", Instance: "cell-1"})
	if err != nil {
		t.Fatalf("getting the instance: %v", err)
	}
	if want := "GET /compute/v1/projects/p/zones/us-central1-a/instances/cell-1"; gotPath != want {
		t.Errorf("request = %q, want %q", gotPath, want)
	}
	if in.GetName() != "cell-1" || in.GetId() != 42 || in.GetStatus() != "RUNNING" {
		t.Errorf("instance = %v, want cell-1, id 42, RUNNING", in)
	}
}
