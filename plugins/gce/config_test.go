package gce

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// Every invalid configuration fails Configure with InvalidConfig naming
// the key, before any call to Compute Engine (or, for what only Compute
// Engine knows, after the call that found it).
func TestConfigureRefusesWithTheKey(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	empty := filepath.Join(dir, "empty.sh")
	big := filepath.Join(dir, "big.sh")
	for path, data := range map[string]string{notPEM: "hello", empty: "", big: strings.Repeat("#", maxStartup+1)} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := newFakeCompute(t)
	base := testConfig(f)
	for _, tc := range []struct {
		name  string
		cfg   map[string]any
		key   string
		calls bool // Compute Engine is asked before the refusal
	}{
		{"project missing", with(base, "project", nil), "project", false},
		{"project malformed", with(base, "project", "Kip_Test"), "project", false},
		{"region missing", with(base, "region", nil), "region", false},
		{"region malformed", with(base, "region", "US-Central"), "region", false},
		{"region does not exist", with(with(base, "region", "europe-west9"), "zones", nil), "region", true},
		{"zone the region does not have", with(base, "zones", []string{"us-central1-a", "us-central1-z"}), "zones[1]", true},
		{"zone of another region", with(base, "zones", []string{"us-central1-a", "us-east1-b"}), "zones[1]", false},
		{"zone twice", with(base, "zones", []string{"us-central1-a", "us-central1-a"}), "zones[1]", false},
		{"zone wrong type", with(base, "zones", "us-central1-a"), "zones", false},
		{"subnetwork missing", with(base, "subnetwork", nil), "subnetwork", false},
		{"subnetwork malformed", with(base, "subnetwork", "Cells!"), "subnetwork", false},
		{"network malformed", with(base, "network", "-x"), "network", false},
		{"service account malformed", with(base, "serviceAccount", "cells"), "serviceAccount", false},
		{"scopes without service account", with(base, "scopes", []string{defaultScope}), "scopes", false},
		{"scope malformed", with(with(base, "serviceAccount", "a@b.iam.gserviceaccount.com"), "scopes", []string{"compute"}), "scopes[0]", false},
		{"image missing", with(base, "image", nil), "image", false},
		{"image both", with(base, "image", map[string]any{"name": "a", "family": "b"}), "image", false},
		{"image project only", with(base, "image", map[string]any{"project": "debian-cloud"}), "image", false},
		{"image name malformed", with(base, "image", map[string]any{"name": "A"}), "image.name", false},
		{"image family malformed", with(base, "image", map[string]any{"family": "a b"}), "image.family", false},
		{"image project malformed", with(base, "image", map[string]any{"family": "a", "project": "X"}), "image.project", false},
		{"image unknown key", with(base, "image", map[string]any{"family": "a", "id": "1"}), "image.id", false},
		{"network tag malformed", with(base, "networkTags", []string{"Kip"}), "networkTags[0]", false},
		{"network tag twice", with(base, "networkTags", []string{"kip", "kip"}), "networkTags[1]", false},
		{"label key malformed", with(base, "labels", map[string]string{"Team": "x"}), "labels.Team", false},
		{"label value malformed", with(base, "labels", map[string]string{"team": "A B"}), "labels.team", false},
		{"label reserved", with(base, "labels", map[string]string{"kip-cell": "x"}), "labels.kip-cell", false},
		{"boot disk size", with(base, "bootDisk", map[string]any{"sizeGb": 5}), "bootDisk.sizeGb", false},
		{"boot disk type", with(base, "bootDisk", map[string]any{"type": "SSD"}), "bootDisk.type", false},
		{"boot disk unknown key", with(base, "bootDisk", map[string]any{"iops": 3000}), "bootDisk.iops", false},
		{"endpoint malformed", with(base, "endpoint", "compute.local"), "endpoint", false},
		{"ca bundle missing", with(base, "caBundle", filepath.Join(dir, "none.pem")), "caBundle", false},
		{"ca bundle not PEM", with(base, "caBundle", notPEM), "caBundle", false},
		{"credentials file missing", with(with(base, "withoutAuthentication", nil), "credentialsFile", filepath.Join(dir, "none.json")), "credentialsFile", false},
		{"credentials file and no authentication", with(base, "credentialsFile", notPEM), "credentialsFile", false},
		{"no authentication without endpoint", with(base, "endpoint", nil), "withoutAuthentication", false},
		{"rate negative", with(base, "rateLimit", map[string]any{"readPerSecond": -1}), "rateLimit.readPerSecond", false},
		{"rate mutate negative", with(base, "rateLimit", map[string]any{"mutatePerSecond": -1}), "rateLimit.mutatePerSecond", false},
		{"burst negative", with(base, "rateLimit", map[string]any{"burst": -1}), "rateLimit.burst", false},
		{"rate unknown key", with(base, "rateLimit", map[string]any{"describePerSecond": 1}), "rateLimit.describePerSecond", false},
		{"startup script missing", with(base, "startupScript", filepath.Join(dir, "none.sh")), "startupScript", false},
		{"startup script empty", with(base, "startupScript", empty), "startupScript", false},
		{"startup script too big", with(base, "startupScript", big), "startupScript", false},
		{"unknown key", with(base, "subnet", "cells"), "subnet", false},
		{"identity certs URL malformed", with(base, "identity", map[string]any{"certsURL": "www.googleapis.com/oauth2/v3/certs"}), "identity.certsURL", false},
		{"identity certs URL wrong type", with(base, "identity", map[string]any{"certsURL": 1}), "identity.certsURL", false},
		{"identity unknown key", with(base, "identity", map[string]any{"certificates": "google.pem"}), "identity.certificates", false},
		{"metadata key malformed", with(base, "metadata", map[string]string{"kip cell": "x"}), "metadata.kip cell", false},
		{"metadata key the plugin's", with(base, "metadata", map[string]string{"kip-bootstrap": "x"}), "metadata.kip-bootstrap", false},
		{"metadata too big", with(base, "metadata", map[string]string{"big": strings.Repeat("x", maxStartup)}), "metadata", false},
		{"subnetwork does not exist", with(base, "subnetwork", "other"), "subnetwork", true},
		{"network is not the subnetwork's", with(base, "network", "default"), "network", true},
		{"image family does not exist", with(base, "image", map[string]any{"family": "none"}), "image.family", true},
		{"image does not exist", with(base, "image", map[string]any{"name": "none"}), "image.name", true},
		{"image project does not exist", with(base, "image", map[string]any{"family": "kip-cell", "project": "debian-cloud"}), "image.family", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.callCount("regions.get")
			_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, Config: mustJSON(t, tc.cfg)})
			var ic *pluginapi.InvalidConfigError
			if !errors.As(err, &ic) || ic.Key != tc.key {
				t.Fatalf("Configure = %v, want InvalidConfig for %s", err, tc.key)
			}
			if asked := f.callCount("regions.get") > before; asked != tc.calls {
				t.Errorf("Compute Engine asked: %v, want %v", asked, tc.calls)
			}
		})
	}
	if _, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{Config: mustJSON(t, base)}); !pluginapi.IsInvalidConfig(err) {
		t.Errorf("Configure without a cluster ID = %v", err)
	}
}

// A valid configuration with every key resolves the subnetwork and the
// image; Application Default Credentials that are missing name
// credentialsFile.
func TestConfigureResolves(t *testing.T) {
	f := newFakeCompute(t)
	script := filepath.Join(t.TempDir(), "startup.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec kip-cell --bootstrap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := with(with(with(with(with(testConfig(f), "network", fakeNetwork), "startupScript", script), "metadata", map[string]string{"kip-cell-sha256": "abc123"}),
		"image", map[string]any{"name": "kip-cell-arm-1", "project": fakeProject}), "bootDisk", map[string]any{"sizeGb": 20, "type": "pd-ssd"})
	p := configured(t, cfg)
	c := p.cfg.Load()
	if !strings.HasSuffix(c.subnetworkURL, "/subnetworks/cells") || !strings.HasSuffix(c.imageURL, "/images/kip-cell-arm-1") || c.imageArch != pluginapi.ArchARM64 {
		t.Errorf("resolved %s, %s, %s", c.subnetworkURL, c.imageURL, c.imageArch)
	}
	req := launchRequest("kip-arm")
	req.InstanceType = "t2a-standard-1"
	if _, err := p.Launch(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	body := f.body("instances.insert", 0)
	init := body["disks"].([]any)[0].(map[string]any)["initializeParams"].(map[string]any)
	if init["diskSizeGb"] != "20" || init["diskType"] != "zones/us-central1-a/diskTypes/pd-ssd" {
		t.Errorf("boot disk %v", init)
	}
	if meta := mustString(t, body["metadata"]); !strings.Contains(meta, "exec kip-cell --bootstrap") || !strings.Contains(meta, `{"key":"kip-cell-sha256","value":"abc123"}`) {
		t.Errorf("metadata %s: want the startup script and kip-cell-sha256", meta)
	}
	// An amd64 type with the arm64 image is refused.
	if _, err := p.Launch(t.Context(), launchRequest("kip-amd")); !pluginapi.IsInvalidConfig(err) {
		t.Errorf("amd64 type with an arm64 image = %v", err)
	}

	odd := filepath.Join(t.TempDir(), "odd.json")
	if err := os.WriteFile(odd, []byte(`{"type": "api_key"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{odd, script} {
		_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster,
			Config: mustJSON(t, with(with(testConfig(f), "withoutAuthentication", nil), "credentialsFile", file))})
		var ic *pluginapi.InvalidConfigError
		if !errors.As(err, &ic) || ic.Key != "credentialsFile" {
			t.Errorf("Configure with credentials file %s = %v, want InvalidConfig for credentialsFile", file, err)
		}
	}

	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
	_, err := newProvider().Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, Config: mustJSON(t, with(testConfig(f), "withoutAuthentication", nil))})
	var ic *pluginapi.InvalidConfigError
	if !errors.As(err, &ic) || ic.Key != "credentialsFile" {
		t.Errorf("Configure without credentials = %v, want InvalidConfig for credentialsFile", err)
	}
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Calls before Configure fail with NotConfigured; GetInfo works.
func TestNotConfigured(t *testing.T) {
	p := newProvider()
	ctx := t.Context()
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); !errors.Is(err, p.cfg.ErrNotConfigured()) {
		t.Errorf("List before Configure = %v", err)
	}
	if _, err := p.Launch(ctx, launchRequest("kip-1")); !errors.Is(err, p.cfg.ErrNotConfigured()) {
		t.Errorf("Launch before Configure = %v", err)
	}
	info, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil || info.Name != "gce" || !json.Valid([]byte(info.ConfigSchema)) || !info.Has(pluginapi.CapabilityInstanceIdentity) {
		t.Errorf("GetInfo = %+v, %v", info, err)
	}
}

// The JSON Schema GetInfo reports, rendered from Config, is the golden
// file: go test -update rewrites it, and its diff shows what a change of
// Config's keys or tags does to the schema.
func TestConfigSchema(t *testing.T) {
	info, err := newProvider().GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-schema.json", []byte(info.ConfigSchema))
}

// With a credentials file, Configure gets a token (here from a local token
// endpoint) and every request carries it; without withoutAuthentication
// nothing goes out unauthenticated.
func TestCredentialsFileAuthenticatesEveryCall(t *testing.T) {
	f := newFakeCompute(t)
	var tokens int
	var mu sync.Mutex
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens++
		mu.Unlock()
		if err := r.ParseForm(); err != nil || r.Form.Get("refresh_token") != "refresh-1" {
			http.Error(w, "bad refresh", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"ya29.test","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokenSrv.Close)
	file := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(file, []byte(`{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"refresh-1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := configured(t, with(with(testConfig(f), "withoutAuthentication", nil), "credentialsFile", file),
		func(p *provider) { p.tokenURL = tokenSrv.URL })
	if _, err := p.Launch(t.Context(), launchRequest("kip-authed")); err != nil {
		t.Fatal(err)
	}
	resp, err := p.RegistryAuth(t.Context(), &pluginapi.RegistryAuthRequest{Image: "us-docker.pkg.dev/kip-test/cells/app"})
	if err != nil || resp.Password != "ya29.test" || resp.Username != registryUser {
		t.Errorf("RegistryAuth = %+v, %v", resp, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.authz) < 4 {
		t.Fatalf("%d requests", len(f.authz))
	}
	for i, a := range f.authz {
		if a != "Bearer ya29.test" {
			t.Errorf("request %d: Authorization %q", i, a)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if tokens != 1 {
		t.Errorf("%d token requests, want 1 (cached)", tokens)
	}
}

// Without zones the cells use every zone of the region.
func TestConfigureTakesTheRegionsZones(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, with(testConfig(f), "zones", nil))
	if got, want := p.cfg.Load().zones, []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"}; !slices.Equal(got, want) {
		t.Errorf("zones %v, want the region's %v", got, want)
	}
}

// What the configuration leaves out takes the defaults configSchema shows.
func TestConfigDefaults(t *testing.T) {
	c, err := decodeConfig(mustJSON(t, testConfig(newFakeCompute(t))))
	if err != nil {
		t.Fatal(err)
	}
	s, err := validate(c)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{s.rate, s.diskType, s.certsURL}
	want := []any{ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20}, "pd-balanced", "https://www.googleapis.com/oauth2/v3/certs"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rate limit, disk type, certs URL = %v, want %v", got, want)
	}
}
