package imds

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// gceInstance starts the Compute Engine simulator, inserts an instance
// (with a service account when withAccount) and returns a GCEClient of its
// metadata server.
func gceInstance(t *testing.T, name string, withAccount bool) *GCEClient {
	t.Helper()
	sim := gcesim.New(gcesim.Options{})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	const zone = gcesim.DefaultRegion + "-a"
	body := map[string]any{"name": name, "machineType": "zones/" + zone + "/machineTypes/e2-small"}
	if withAccount {
		body["serviceAccounts"] = []any{map[string]any{"email": "default"}}
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/compute/v1/projects/"+gcesim.DefaultProject+"/zones/"+zone+"/instances", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("insert: %s", resp.Status)
	}
	sock, ok := sim.MetadataSocket(zone, name)
	if !ok {
		t.Fatal("no metadata socket")
	}
	c, err := NewGCE("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGCEIdentityToken: the token names the audience and the instance;
// an instance without a service account has none (ErrNotFound).
func TestGCEIdentityToken(t *testing.T) {
	c := gceInstance(t, "kip-a", true)
	token, err := c.IdentityToken(t.Context(), "kipcell.io/join/e2e/kip-a")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	var claims struct {
		Aud    string
		Google struct {
			ComputeEngine struct {
				InstanceName string `json:"instance_name"`
			} `json:"compute_engine"`
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		t.Fatalf("claims %s: %v", raw, err)
	}
	if claims.Aud != "kipcell.io/join/e2e/kip-a" || claims.Google.ComputeEngine.InstanceName != "kip-a" {
		t.Errorf("claims %s: want the audience asked for and instance kip-a", raw)
	}

	without := gceInstance(t, "kip-b", false)
	if _, err := without.IdentityToken(t.Context(), "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("IdentityToken without a service account: %v, want ErrNotFound", err)
	}
}

// TestGCEIdentityTokenNotMetadata: a server that is not the metadata
// server (no Metadata-Flavor in its answer), or none, is an error.
func TestGCEIdentityTokenNotMetadata(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("a.b.c")) }), ReadHeaderTimeout: time.Second}
	sock := t.TempDir() + "/md.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := NewGCE("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := c.IdentityToken(t.Context(), "a"); err == nil || !strings.Contains(err.Error(), "Metadata-Flavor") {
		t.Errorf("IdentityToken from another server = %q, %v; want an error naming Metadata-Flavor", tok, err)
	}
	none, err := NewGCE("unix://" + t.TempDir() + "/none.sock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := none.IdentityToken(ctx, "a"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("IdentityToken without a metadata server: %v; want an error", err)
	}
}

func TestNewGCE(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ok       bool
	}{
		{DefaultGCEEndpoint, true},
		{"unix:///run/md.sock", true},
		{"https://metadata.google.internal", false},
		{"metadata.google.internal", false},
		{"", false},
	} {
		_, err := NewGCE(tc.endpoint)
		if (err == nil) != tc.ok {
			t.Errorf("NewGCE(%q): %v, want ok=%v", tc.endpoint, err, tc.ok)
		}
	}
}
