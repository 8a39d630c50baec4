package sdktest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/identity"
	"github.com/kipcell/kip/plugins/gce"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// TestGCEPluginVerifiesIdentityTokens: the gce plugin, pointed at the
// simulator's JWKS, launches two cells; each cell's identity token, read
// from its instance's metadata server for the cell's audience, as the
// agent reads it (cell/imds), passes for its own instance and is refused for
// the other, and a token for another audience is refused.
func TestGCEPluginVerifiesIdentityTokens(t *testing.T) {
	const cluster = "sdk-identity"
	sim := gcesim.New(gcesim.Options{Project: project, OperationDelay: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	cfg, err := json.Marshal(map[string]any{
		"project": project, "region": "us-central1", "zones": []string{zoneA}, "subnetwork": "default",
		"image":    map[string]any{"project": "debian-cloud", "family": "debian-12"},
		"endpoint": url, "withoutAuthentication": true,
		"serviceAccount": "kip-cell@" + project + ".iam.gserviceaccount.com",
		"identity":       map[string]any{"certsURL": sim.IdentityCertsURL()},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p := gce.New(slog.New(slog.DiscardHandler))
	if _, err := p.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: cluster, NodeName: "kip", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	info, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil || !info.Has(pluginapi.CapabilityInstanceIdentity) {
		t.Fatalf("GetInfo = %+v, %v; want capability %s", info, err, pluginapi.CapabilityInstanceIdentity)
	}
	verifier := p.(pluginapi.InstanceIdentityVerifier)

	cells := []string{"kip-id-a", "kip-id-b"}
	ids := make([]string, len(cells))
	tokens := make([][]byte, len(cells))
	for i, cell := range cells {
		inst, err := p.Launch(ctx, &pluginapi.LaunchRequest{
			CellID: cell, NodeName: "kip", PodUID: "uid-" + cell, PodNamespace: "default", PodName: cell,
			InstanceType: "e2-small", CapacityType: pluginapi.CapacityOnDemand, Zones: []string{zoneA},
			Bootstrap: []byte(`{"cellID":"` + cell + `"}`),
		})
		if err != nil {
			t.Fatalf("Launch %s: %v", cell, err)
		}
		ids[i] = inst.Instance.ID
		tokens[i] = identityToken(t, sim, cell, identity.Audience(cluster, cell))
	}

	for i := range cells {
		resp, err := verifier.VerifyInstanceIdentity(ctx, &pluginapi.VerifyInstanceIdentityRequest{InstanceID: ids[i], Document: tokens[i]})
		if err != nil || resp.NotChecked != "" {
			t.Errorf("%s's own token: %+v, %v; want it to pass", ids[i], resp, err)
		}
		other := ids[1-i]
		if _, err := verifier.VerifyInstanceIdentity(ctx, &pluginapi.VerifyInstanceIdentityRequest{InstanceID: other, Document: tokens[i]}); err == nil || !strings.Contains(err.Error(), "not "+other+"'s") {
			t.Errorf("%s's token for %s: %v; want a refusal naming the instances", ids[i], other, err)
		}
	}
	elsewhere := identityToken(t, sim, cells[0], "https://example.com")
	if _, err := verifier.VerifyInstanceIdentity(ctx, &pluginapi.VerifyInstanceIdentityRequest{InstanceID: ids[0], Document: elsewhere}); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Errorf("a token for another audience: %v; want a refusal naming the audience", err)
	}
}

// identityToken reads the identity token of instance name (in zoneA) for
// audience from its metadata server, as Compute Engine's agent would.
func identityToken(t *testing.T, sim *gcesim.Server, name, audience string) []byte {
	t.Helper()
	sock, ok := sim.MetadataSocket(zoneA, name)
	if !ok {
		t.Fatalf("no metadata server for %s", name)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/identity?"+
		url.Values{"audience": {audience}, "format": {"full"}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reading %s's identity token: %s %s %v", name, resp.Status, body, err)
	}
	return body
}
