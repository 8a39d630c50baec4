package cell

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/imds"
	"github.com/kipcell/kip/pluginapi/identity"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// gceMetadata starts the Compute Engine simulator with instance name (with
// a service account) and returns its metadata server's endpoint.
func gceMetadata(t *testing.T, name string) string {
	t.Helper()
	sim := gcesim.New(gcesim.Options{Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	const zone = gcesim.DefaultRegion + "-a"
	body, _ := json.Marshal(map[string]any{
		"name": name, "machineType": "zones/" + zone + "/machineTypes/e2-small",
		"serviceAccounts": []any{map[string]any{"email": "default"}},
	})
	resp, err := http.Post(url+"/compute/v1/projects/"+gcesim.DefaultProject+"/zones/"+zone+"/instances", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	sock, ok := sim.MetadataSocket(zone, name)
	if resp.StatusCode != http.StatusOK || !ok {
		t.Fatalf("insert: %s, socket %v", resp.Status, ok)
	}
	return "unix://" + sock
}

// TestInstanceIdentity: the identity the agent joins with is the one
// given, else Compute Engine's identity token for the cell's audience
// (no signature), else EC2's identity document, else none.
func TestInstanceIdentity(t *testing.T) {
	b := &api.Bootstrap{ClusterID: "prod", CellID: "kip-ident"}
	gce := gceMetadata(t, b.CellID)
	ec2, err := imds.New("unix://" + t.TempDir() + "/no-imds.sock")
	if err != nil {
		t.Fatal(err)
	}
	given := func(context.Context) ([]byte, []byte, error) { return []byte("given"), []byte("sig"), nil }

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// read is what the identity the agent joins with reads; none: there
	// is no identity.
	type result struct {
		doc, sig []byte
		err      error
		none     bool
	}
	read := func(cfg Config, meta *imds.Client) result {
		t.Helper()
		f, err := instanceIdentity(cfg, meta)
		if err != nil {
			t.Fatalf("instanceIdentity: %v", err)
		}
		if f == nil {
			return result{none: true}
		}
		doc, sig, err := f(ctx)
		return result{doc: doc, sig: sig, err: err}
	}

	if r := read(Config{Bootstrap: b, InstanceIdentity: given, GCEMetadataEndpoint: gce}, ec2); string(r.doc) != "given" {
		t.Errorf("with InstanceIdentity set: %q, want the given identity", r.doc)
	}

	r := read(Config{Bootstrap: b, GCEMetadataEndpoint: gce}, ec2)
	if r.err != nil || r.sig != nil {
		t.Fatalf("with a GCE metadata server: signature %q, %v; want a token alone", r.sig, r.err)
	}
	parts := strings.Split(string(r.doc), ".")
	var claims struct{ Aud string }
	if raw, err := base64.RawURLEncoding.DecodeString(parts[min(1, len(parts)-1)]); err != nil || json.Unmarshal(raw, &claims) != nil {
		t.Fatalf("token %q: %v", r.doc, err)
	}
	if want := identity.Audience("prod", "kip-ident"); claims.Aud != want {
		t.Errorf("token for audience %q, want %q", claims.Aud, want)
	}

	// EC2's, from an IMDS that is not there: it asks IMDSv2 for a token.
	if r := read(Config{Bootstrap: b}, ec2); r.none || r.err == nil || !strings.Contains(r.err.Error(), "/latest/api/token") {
		t.Errorf("with an IMDS alone: %+v; want EC2's identity document read", r)
	}
	if r := read(Config{Bootstrap: b}, nil); !r.none {
		t.Error("without any metadata: an identity, want none")
	}
	if _, err := instanceIdentity(Config{Bootstrap: b, GCEMetadataEndpoint: "https://metadata"}, nil); err == nil {
		t.Error("a GCE metadata endpoint that is not http or unix was taken")
	}
}
