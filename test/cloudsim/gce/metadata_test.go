package gcesim

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// metadataClient is an HTTP client of the metadata server at a socket.
func metadataClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// getMetadata reads path (after /computeMetadata/v1/) from the metadata
// server at sock, with Metadata-Flavor: Google when flavor is set.
func getMetadata(t *testing.T, sock, path string, flavor bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://metadata.google.internal/computeMetadata/v1/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if flavor {
		req.Header.Set("Metadata-Flavor", "Google")
	}
	resp, err := metadataClient(sock).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if got := resp.Header.Get("Metadata-Flavor"); got != "Google" {
		t.Errorf("GET %s: Metadata-Flavor %q, want Google", path, got)
	}
	return resp.StatusCode, string(body)
}

// verifyJWT checks token's RS256 signature against the simulator's JWKS
// (fetched from its certs URL) and returns its claims.
func verifyJWT(t *testing.T, s *testSim, token string) map[string]any {
	t.Helper()
	resp, err := http.Get(s.IdentityCertsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=3600") {
		t.Errorf("certs Cache-Control %q, want a max-age", cc)
	}
	var set struct {
		Keys []struct{ Kty, Alg, Kid, N, E string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("certs: %+v, %v", set, err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	var header map[string]string
	decodeSegment(t, parts[0], &header)
	k := set.Keys[0]
	if diff := cmp.Diff(map[string]string{"alg": "RS256", "kid": k.Kid, "typ": "JWT"}, header); diff != "" {
		t.Errorf("JWT header (-want +got):\n%s", diff)
	}
	n, _ := base64.RawURLEncoding.DecodeString(k.N)
	e, _ := base64.RawURLEncoding.DecodeString(k.E)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("the token's signature does not verify with the JWKS: %v", err)
	}
	var claims map[string]any
	decodeSegment(t, parts[1], &claims)
	return claims
}

func decodeSegment(t *testing.T, seg string, v any) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatalf("segment %q: %v", seg, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("segment %s: %v", raw, err)
	}
}

// TestMetadataServer: an instance's metadata server answers its paths
// with Metadata-Flavor only, and its identity token is a JWT the JWKS
// verifies, with Compute Engine's claims.
func TestMetadataServer(t *testing.T) {
	clock := newClock()
	s := startSim(t, Options{Now: clock.Now})
	body := insertBody("kip-md", "e2-small", "", "", `{"cellID":"kip-md"}`)
	body["serviceAccounts"] = []any{map[string]any{"email": "cells@kip-test.iam.gserviceaccount.com", "scopes": []any{"https://www.googleapis.com/auth/cloud-platform"}}}
	if code, op := s.insert(body, ""); code != http.StatusOK {
		t.Fatalf("insert: %d %v", code, op)
	}
	in, _ := s.Instance(testZone, "kip-md")
	sock, ok := s.MetadataSocket(testZone, "kip-md")
	if !ok {
		t.Fatal("no metadata socket")
	}

	for _, tt := range []struct {
		path   string
		flavor bool
		code   int
		body   string
	}{
		{"instance/name", false, http.StatusForbidden, ""},
		{"instance/name", true, http.StatusOK, "kip-md"},
		{"instance/zone", true, http.StatusOK, "projects/123456789012/zones/" + testZone},
		{"instance/id", true, http.StatusOK, big.NewInt(0).SetUint64(in.ID).String()},
		{"instance/attributes/", true, http.StatusOK, "kip-bootstrap\nstartup-script\n"},
		{"instance/attributes/kip-bootstrap", true, http.StatusOK, `{"cellID":"kip-md"}`},
		{"instance/attributes/kip-other", true, http.StatusNotFound, ""},
		{"instance/network-interfaces/0/ip", true, http.StatusOK, in.Address},
		{"project/project-id", true, http.StatusOK, testProject},
		{"instance/service-accounts/default/identity", true, http.StatusBadRequest, ""},
		{"instance/service-accounts/default/identity?audience=a&format=compact", true, http.StatusBadRequest, ""},
		{"instance/unknown", true, http.StatusNotFound, ""},
	} {
		code, got := getMetadata(t, sock, tt.path, tt.flavor)
		if code != tt.code || (tt.body != "" && got != tt.body) {
			t.Errorf("GET %s (flavor %v) = %d %q, want %d %q", tt.path, tt.flavor, code, got, tt.code, tt.body)
		}
	}

	q := url.Values{"audience": {"kipcell.io/join/c/kip-md"}, "format": {"full"}}
	code, token := getMetadata(t, sock, "instance/service-accounts/default/identity?"+q.Encode(), true)
	if code != http.StatusOK {
		t.Fatalf("identity: %d %s", code, token)
	}
	claims := verifyJWT(t, s, token)
	now := float64(clock.Now().Unix())
	for _, k := range []string{"azp", "sub"} {
		if v, _ := claims[k].(string); v == "" {
			t.Errorf("claim %s is empty", k)
		}
		delete(claims, k)
	}
	want := map[string]any{
		"iss": "https://accounts.google.com", "aud": "kipcell.io/join/c/kip-md",
		"email": "cells@kip-test.iam.gserviceaccount.com", "email_verified": true,
		"iat": now, "exp": now + 3600,
		"google": map[string]any{"compute_engine": map[string]any{
			"project_id": testProject, "project_number": float64(DefaultProjectNumber), "zone": testZone,
			"instance_id": big.NewInt(0).SetUint64(in.ID).String(), "instance_name": "kip-md",
			"instance_creation_timestamp": now,
		}},
	}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	q.Set("format", "standard")
	_, token = getMetadata(t, sock, "instance/service-accounts/default/identity?"+q.Encode(), true)
	if claims := verifyJWT(t, s, token); claims["google"] != nil {
		t.Errorf("a standard token has google claims: %v", claims["google"])
	}

	// Deleted, its cell stopped: the metadata server is gone.
	if code, op := s.do(http.MethodDelete, "zones/"+testZone+"/instances/kip-md", nil); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, op)
	}
	if _, ok := s.MetadataSocket(testZone, "kip-md"); ok {
		t.Error("the deleted instance's metadata server still serves")
	}
}

// TestMetadataWithoutServiceAccount: an instance without a service
// account has no identity token, as on Compute Engine.
func TestMetadataWithoutServiceAccount(t *testing.T) {
	s := startSim(t, Options{})
	if code, op := s.insert(insertBody("kip-nosa", "e2-small", "", "", ""), ""); code != http.StatusOK {
		t.Fatalf("insert: %d %v", code, op)
	}
	sock, ok := s.MetadataSocket(testZone, "kip-nosa")
	if !ok {
		t.Fatal("no metadata socket")
	}
	if code, body := getMetadata(t, sock, "instance/service-accounts/default/identity?audience=a", true); code != http.StatusNotFound {
		t.Errorf("identity without a service account = %d %q, want 404", code, body)
	}
}
