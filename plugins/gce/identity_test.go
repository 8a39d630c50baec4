package gce

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/identity"
)

// testKeys are RSA keys shared by the identity tests (a key takes a
// while to make).
var testKeys = func() [2]*rsa.PrivateKey {
	var keys [2]*rsa.PrivateKey
	for i := range keys {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keys[i] = k
	}
	return keys
}()

// jwksServer serves the JWKS of keys (by kid) with cacheControl, counting
// its fetches; status answers instead when not 200.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int32
	status  atomic.Int32
	keys    atomic.Pointer[map[string]*rsa.PublicKey]
}

func newJWKS(t *testing.T, cacheControl string, keys map[string]*rsa.PublicKey) *jwksServer {
	t.Helper()
	j := &jwksServer{}
	j.keys.Store(&keys)
	j.status.Store(http.StatusOK)
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		if st := int(j.status.Load()); st != http.StatusOK {
			http.Error(w, "unavailable", st)
			return
		}
		var set []map[string]string
		for kid, k := range *j.keys.Load() {
			set = append(set, map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		set = append(set, map[string]string{"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"})
		w.Header().Set("Cache-Control", cacheControl)
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	}))
	t.Cleanup(j.Close)
	return j
}

// signToken is a JWT of claims signed RS256 by key, its header naming
// kid (and alg).
func signToken(t testing.TB, key *rsa.PrivateKey, alg, kid string, claims map[string]any) []byte {
	t.Helper()
	seg := func(v any) string { return base64.RawURLEncoding.EncodeToString(mustJSON(t, v)) }
	signed := seg(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"}) + "." + seg(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return []byte(signed + "." + base64.RawURLEncoding.EncodeToString(sig))
}

// tokenClaimsFor are the claims of Compute Engine's full-format token of
// instance zone/name in fakeProject, for testCluster, issued at iat.
func tokenClaimsFor(zone, name string, iat time.Time) map[string]any {
	return map[string]any{
		"iss": "https://accounts.google.com", "aud": identity.Audience(testCluster, name),
		"azp": "1234", "sub": "1234", "email": "cells@kip-test.iam.gserviceaccount.com", "email_verified": true,
		"iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix(),
		"google": map[string]any{"compute_engine": map[string]any{
			"project_id": fakeProject, "project_number": 42, "zone": zone,
			"instance_id": "987", "instance_name": name, "instance_creation_timestamp": iat.Add(-time.Minute).Unix(),
		}},
	}
}

// withClaim returns claims with key set (deleted for nil), a dotted key
// reaching into google.compute_engine.
func withClaim(claims map[string]any, key string, v any) map[string]any {
	out := map[string]any{}
	for k, x := range claims {
		out[k] = x
	}
	if sub, ok := strings.CutPrefix(key, "google.compute_engine."); ok {
		ce := map[string]any{}
		for k, x := range claims["google"].(map[string]any)["compute_engine"].(map[string]any) {
			ce[k] = x
		}
		if v == nil {
			delete(ce, sub)
		} else {
			ce[sub] = v
		}
		out["google"] = map[string]any{"compute_engine": ce}
		return out
	}
	if v == nil {
		delete(out, key)
	} else {
		out[key] = v
	}
	return out
}

// identityProvider is a provider configured with a service account and
// the JWKS of j, its clock at *now.
func identityProvider(t *testing.T, j *jwksServer, now *time.Time) *provider {
	t.Helper()
	f := newFakeCompute(t)
	cfg := with(with(testConfig(f), "serviceAccount", "cells@kip-test.iam.gserviceaccount.com"), "identity", map[string]any{"certsURL": j.URL})
	return configured(t, cfg, func(p *provider) { p.Now = func() time.Time { return *now } })
}

// TestVerifyInstanceIdentity: the token of the instance asked about,
// signed by a key of the JWKS, passes; every other is refused, saying
// why.
func TestVerifyInstanceIdentity(t *testing.T) {
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	good, forger := testKeys[0], testKeys[1]
	j := newJWKS(t, "public, max-age=3600, must-revalidate, no-transform", map[string]*rsa.PublicKey{"k1": &good.PublicKey})
	p := identityProvider(t, j, &now)
	const zone, name = "us-central1-a", "kip-abc"
	const id = zone + "/" + name
	claims := tokenClaimsFor(zone, name, now)
	tok := func(c map[string]any) []byte { return signToken(t, good, "RS256", "k1", c) }

	valid := tok(claims)
	forged := signToken(t, forger, "RS256", "k1", claims)
	altered := []byte(strings.Join([]string{strings.Split(string(valid), ".")[0], base64.RawURLEncoding.EncodeToString(mustJSON(t, withClaim(claims, "google.compute_engine.instance_name", "kip-other"))), strings.Split(string(valid), ".")[2]}, "."))

	for _, tt := range []struct {
		name     string
		instance string
		token    []byte
		want     string // "" passes; else a part of the refusal
	}{
		{"its own token", id, valid, ""},
		{"issued a minute ahead (skew)", id, tok(withClaim(withClaim(claims, "iat", now.Add(time.Minute).Unix()), "exp", now.Add(time.Hour).Unix())), ""},
		{"expired a minute ago (skew)", id, tok(withClaim(claims, "exp", now.Add(-time.Minute).Unix())), ""},
		{"issuer without scheme", id, tok(withClaim(claims, "iss", "accounts.google.com")), ""},
		{"no token", id, nil, "sent no identity token"},
		{"not a JWT", id, []byte("a.b"), "not a JWT"},
		{"garbage header", id, []byte("!!.b.c"), "header"},
		{"another algorithm", id, signToken(t, good, "HS256", "k1", claims), `signed "HS256"`},
		{"forged signature", id, forged, "forged or altered"},
		{"altered claims", "us-central1-a/kip-other", altered, "forged or altered"},
		{"unknown key id", id, signToken(t, good, "RS256", "k9", claims), `key "k9"`},
		{"another instance's token", "us-central1-a/kip-other", valid, "not us-central1-a/kip-other's"},
		{"the same name in another zone", "us-central1-b/" + name, valid, "not us-central1-b/kip-abc's"},
		{"another project's instance", id, tok(withClaim(claims, "google.compute_engine.project_id", "other-project")), `project "other-project"`},
		{"wrong audience", id, tok(withClaim(claims, "aud", "https://example.com")), `audience "https://example.com"`},
		{"another cluster's audience", id, tok(withClaim(claims, "aud", identity.Audience("other", name))), "audience"},
		{"expired", id, tok(withClaim(claims, "exp", now.Add(-10*time.Minute).Unix())), "expired"},
		{"no expiry", id, tok(withClaim(claims, "exp", nil)), "expired"},
		{"issued in the future", id, tok(withClaim(claims, "iat", now.Add(10*time.Minute).Unix())), "in the future"},
		{"wrong issuer", id, tok(withClaim(claims, "iss", "https://evil.example.com")), "not Google"},
		{"standard format", id, tok(withClaim(claims, "google", nil)), "names no instance"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.VerifyInstanceIdentity(t.Context(), &pluginapi.VerifyInstanceIdentityRequest{InstanceID: tt.instance, Document: tt.token})
			if tt.want == "" {
				if err != nil || resp.NotChecked != "" {
					t.Fatalf("VerifyInstanceIdentity = %+v, %v; want it to pass", resp, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("VerifyInstanceIdentity passed; want a refusal saying %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || pluginapi.IsTransient(err) || pluginapi.IsInvalidConfig(err) {
				t.Errorf("refusal %q (%T): want a plain error saying %q", err, err, tt.want)
			}
		})
	}
}

// TestIdentityKeysCached: the keys are fetched once while Cache-Control
// keeps them, again once they expire; an unknown key ID fetches them
// again at most once a minute (a rotated key is found); a JWKS that
// cannot be fetched is Transient, not a refusal.
func TestIdentityKeysCached(t *testing.T) {
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	key, rotated := testKeys[0], testKeys[1]
	j := newJWKS(t, "public, max-age=600", map[string]*rsa.PublicKey{"k1": &key.PublicKey})
	p := identityProvider(t, j, &now)
	const id = "us-central1-a/kip-abc"
	verify := func(tok []byte) error {
		_, err := p.VerifyInstanceIdentity(t.Context(), &pluginapi.VerifyInstanceIdentityRequest{InstanceID: id, Document: tok})
		return err
	}
	fetches := func(want int32, when string) {
		t.Helper()
		if got := j.fetches.Load(); got != want {
			t.Errorf("%s: %d fetches of the keys, want %d", when, got, want)
		}
	}
	for range 3 {
		if err := verify(signToken(t, key, "RS256", "k1", tokenClaimsFor("us-central1-a", "kip-abc", now))); err != nil {
			t.Fatal(err)
		}
	}
	fetches(1, "three checks within max-age")

	// Rotated: k2 is unknown until the keys are fetched again, at most
	// once a minute.
	j.keys.Store(&map[string]*rsa.PublicKey{"k1": &key.PublicKey, "k2": &rotated.PublicKey})
	now = now.Add(30 * time.Second)
	k2 := func() []byte {
		return signToken(t, rotated, "RS256", "k2", tokenClaimsFor("us-central1-a", "kip-abc", now))
	}
	if err := verify(k2()); err == nil {
		t.Error("a key unknown within a minute of the fetch passed")
	}
	fetches(1, "an unknown key within a minute")
	now = now.Add(time.Minute)
	if err := verify(k2()); err != nil {
		t.Errorf("the rotated key: %v", err)
	}
	fetches(2, "an unknown key a minute later")

	// Expired (max-age 600 s) and unreachable: Transient.
	now = now.Add(11 * time.Minute)
	j.status.Store(http.StatusServiceUnavailable)
	if err := verify(k2()); !pluginapi.IsTransient(err) {
		t.Errorf("keys unreachable: %v, want Transient", err)
	}
	j.status.Store(http.StatusOK)
	if err := verify(k2()); err != nil {
		t.Errorf("keys back: %v", err)
	}
	fetches(4, "after max-age, failed then fetched")
}

// TestVerifyInstanceIdentityNotChecked: without serviceAccount the cells
// have no token, and the plugin says it does not check.
func TestVerifyInstanceIdentityNotChecked(t *testing.T) {
	p := configured(t, testConfig(newFakeCompute(t)))
	resp, err := p.VerifyInstanceIdentity(t.Context(), &pluginapi.VerifyInstanceIdentityRequest{InstanceID: "us-central1-a/kip-abc"})
	if err != nil || !strings.Contains(resp.NotChecked, "serviceAccount") {
		t.Errorf("VerifyInstanceIdentity without serviceAccount = %+v, %v; want NotChecked naming serviceAccount", resp, err)
	}
}

func TestCacheLifetime(t *testing.T) {
	for _, tt := range []struct {
		cc, age string
		want    time.Duration
	}{
		{"public, max-age=20000, must-revalidate, no-transform", "", 20000 * time.Second},
		{"max-age=600", "100", 500 * time.Second},
		{"max-age=600", "700", 0},
		{"no-cache, max-age=600", "", 0},
		{"max-age=x", "", 0},
		{"", "", 0},
	} {
		h := http.Header{}
		h.Set("Cache-Control", tt.cc)
		if tt.age != "" {
			h.Set("Age", tt.age)
		}
		if got := cacheLifetime(h); got != tt.want {
			t.Errorf("cacheLifetime(%q, Age %q) = %s, want %s", tt.cc, tt.age, got, tt.want)
		}
	}
}
