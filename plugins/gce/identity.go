package gce

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/identity"
)

// Instance identity (capability instance-identity): before the host signs
// a cell's certificate it asks whether the identity the cell's agent read
// from its instance's metadata server is the instance's. On Compute
// Engine that is the instance's identity token
// (https://cloud.google.com/compute/docs/instances/verifying-instance-identity):
// a JWT Google signs (RS256) for the instance's service account, minted
// for an audience the instance names, whose claims in the full format
// name the instance (google.compute_engine: project_id, zone,
// instance_name, instance_id). The agent asks for the audience
// pluginapi/identity.Audience(cluster ID, cell ID) (kip-cell
// --gce-metadata-endpoint) and sends the token as the request's Document.
//
// The check, with the standard library: the token's header names RS256
// and a key ID; the key is one of Google's public keys, the JWKS at
// identity.certsURL (Google's https://www.googleapis.com/oauth2/v3/certs
// by default; a simulator's or a private mirror's otherwise), kept as
// long as its Cache-Control max-age says and fetched again, at most once
// a minute, for a key ID it lacks (Google rotates its keys); the signature
// verifies with it; iss is Google's; aud is the cell's audience; iat is
// not in the future and exp not past, give or take identityClockSkew; and
// google.compute_engine names this project and the instance asked about
// (zone/name = InstanceID). The SDK's idtoken.Validator is not used: it
// checks exp against the wall clock without skew, checks neither iss nor
// iat, and answers a certs URL it cannot reach as it answers a forged
// signature, where the contract wants Transient for the one and a refusal
// for the other.
//
// An instance without a service account has no identity token: without
// serviceAccount in the configuration the plugin does not check, and says
// so (NotChecked); with it, a join without a token is refused.

// IdentityConfig is the identity section of the plugin's configuration.
type IdentityConfig struct {
	// CertsURL omitted is Google's (defaults.Identity.CertsURL).
	CertsURL string `json:"certsURL,omitempty" doc:"JWKS of the keys that sign identity tokens: a simulator's or a private mirror's (http or https URL)."`
}

// Identity token constants.
const (
	// identityClockSkew is how far the host's clock and Google's may
	// differ: a token issued that far in the future, or expired that long
	// ago, still passes.
	identityClockSkew = 2 * time.Minute
	// certsRefetch is how soon after a fetch of the keys a token with an
	// unknown key ID fetches them again.
	certsRefetch = time.Minute
	// certsTimeout bounds one fetch of the keys.
	certsTimeout = 10 * time.Second
	// maxCertsBody and maxToken bound what is read: Google's JWKS is about
	// 2 KB, a token about 1 KB.
	maxCertsBody = 1 << 20
	maxToken     = 16 << 10
)

// googleIssuers are the iss values of Google's identity tokens.
var googleIssuers = []string{"https://accounts.google.com", "accounts.google.com"}

// checkIdentity checks the identity section and applies its default.
func checkIdentity(c *IdentityConfig) (string, error) {
	if c == nil || c.CertsURL == "" {
		return defaults.Identity.CertsURL, nil
	}
	u, err := url.Parse(c.CertsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", pluginapi.NewInvalidConfig("identity.certsURL", "%q is not an http or https URL of a JWKS such as %q", c.CertsURL, defaults.Identity.CertsURL)
	}
	return c.CertsURL, nil
}

// VerifyInstanceIdentity checks a cell's identity token
// (pluginapi.InstanceIdentityVerifier): see the top of this file. Without
// serviceAccount it answers NotChecked.
func (p *provider) VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	if cfg.serviceAccount == "" {
		return &pluginapi.VerifyInstanceIdentityResponse{NotChecked: "serviceAccount is not set in the gce plugin's configuration: cells without a service account have no identity token"}, nil
	}
	v := identityCheck{keys: cfg.certs, project: cfg.project, clusterID: cfg.clusterID, now: p.Now()}
	if err := v.verify(ctx, req.InstanceID, req.Document); err != nil {
		return nil, err
	}
	return &pluginapi.VerifyInstanceIdentityResponse{}, nil
}

// identityCheck is what a token is checked against.
type identityCheck struct {
	keys      *googleKeys
	project   string
	clusterID string
	now       time.Time
}

// tokenClaims are the claims the check reads.
type tokenClaims struct {
	Iss    string `json:"iss"`
	Aud    string `json:"aud"`
	Exp    int64  `json:"exp"`
	Iat    int64  `json:"iat"`
	Google struct {
		ComputeEngine *struct {
			ProjectID    string `json:"project_id"`
			Zone         string `json:"zone"`
			InstanceName string `json:"instance_name"`
		} `json:"compute_engine"`
	} `json:"google"`
}

// verify checks token for instance (zone/name); an error refuses it, but
// for a Transient one (the keys could not be fetched).
func (v identityCheck) verify(ctx context.Context, instance string, token []byte) error {
	if len(token) == 0 {
		return fmt.Errorf("instance %s sent no identity token (its agent reads it from the metadata server with kip-cell --gce-metadata-endpoint)", instance)
	}
	if len(token) > maxToken {
		return fmt.Errorf("the identity token of instance %s is %d bytes, not a Compute Engine identity token", instance, len(token))
	}
	parts := strings.Split(string(bytes.TrimSpace(token)), ".")
	if len(parts) != 3 {
		return fmt.Errorf("the identity token of instance %s is not a JWT (%d parts)", instance, len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return fmt.Errorf("reading the identity token header of instance %s: %w", instance, err)
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("the identity token of instance %s is signed %q, not RS256 as Google signs", instance, header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("reading the identity token signature of instance %s: %w", instance, err)
	}
	key, err := v.keys.key(ctx, header.Kid, v.now)
	if err != nil {
		return err
	}
	if key == nil {
		return fmt.Errorf("the identity token of instance %s is signed by key %q, which is not one of %s", instance, header.Kid, v.keys.url)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("the identity token of instance %s has a signature that key %q of %s does not verify: forged or altered", instance, header.Kid, v.keys.url)
	}
	var c tokenClaims
	if err := decodeSegment(parts[1], &c); err != nil {
		return fmt.Errorf("reading the identity token claims of instance %s: %w", instance, err)
	}
	return v.checkClaims(instance, &c)
}

// checkClaims checks a signed token's claims.
func (v identityCheck) checkClaims(instance string, c *tokenClaims) error {
	_, cell, _ := strings.Cut(instance, "/")
	aud := identity.Audience(v.clusterID, cell)
	now := v.now.Unix()
	skew := int64(identityClockSkew / time.Second)
	switch ce := c.Google.ComputeEngine; {
	case !slices.Contains(googleIssuers, c.Iss):
		return fmt.Errorf("the identity token of instance %s is issued by %q, not Google", instance, c.Iss)
	case ce == nil:
		return fmt.Errorf("the identity token of instance %s names no instance (google.compute_engine: not the full format)", instance)
	case ce.ProjectID != v.project:
		return fmt.Errorf("the identity token of instance %s is from project %q, not %s", instance, ce.ProjectID, v.project)
	case ce.Zone+"/"+ce.InstanceName != instance:
		return fmt.Errorf("the identity token is instance %s/%s's, not %s's", ce.Zone, ce.InstanceName, instance)
	case c.Aud != aud:
		return fmt.Errorf("the identity token of instance %s is for audience %q, not %q", instance, c.Aud, aud)
	case c.Exp == 0 || now > c.Exp+skew:
		return fmt.Errorf("the identity token of instance %s expired at %s", instance, time.Unix(c.Exp, 0).UTC().Format(time.RFC3339))
	case c.Iat == 0 || c.Iat > now+skew:
		return fmt.Errorf("the identity token of instance %s is issued at %s, in the future", instance, time.Unix(c.Iat, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// decodeSegment decodes a JWT segment (base64url, no padding) of JSON.
func decodeSegment(seg string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// googleKeys are the public keys of a JWKS URL, fetched when needed and
// kept as its Cache-Control says. It is safe for concurrent use; one fetch
// runs at a time.
type googleKeys struct {
	url    string
	client *http.Client

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time // zero: never
	expires time.Time
}

func newGoogleKeys(url string, client *http.Client) *googleKeys {
	return &googleKeys{url: url, client: client}
}

// key returns the key kid, fetching the keys when they have expired, or
// when kid is unknown and they are older than certsRefetch; nil when the
// keys do not hold it. A failed fetch is Transient.
func (g *googleKeys) key(ctx context.Context, kid string, now time.Time) (*rsa.PublicKey, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.keys[kid]
	fresh := !g.fetched.IsZero() && now.Before(g.expires)
	if fresh && (ok || now.Before(g.fetched.Add(certsRefetch))) {
		return k, nil
	}
	if err := g.fetch(ctx, now); err != nil {
		return nil, err
	}
	return g.keys[kid], nil
}

// fetch reads the JWKS. The caller holds g.mu.
func (g *googleKeys) fetch(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, certsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	if err != nil {
		return fmt.Errorf("fetching the identity keys from %s: %w", g.url, err)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return pluginapi.NewTransient("fetching the identity keys from %s: %v", g.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCertsBody))
	if err != nil {
		return pluginapi.NewTransient("reading the identity keys from %s: %v", g.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return pluginapi.NewTransient("fetching the identity keys from %s: %s", g.url, resp.Status)
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return pluginapi.NewTransient("reading the identity keys from %s: %v", g.url, err)
	}
	g.keys, g.fetched, g.expires = keys, now, now.Add(cacheLifetime(resp.Header))
	return nil
}

// parseJWKS returns the RSA keys of a JWKS by key ID (other kinds are
// skipped).
func parseJWKS(body []byte) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if err := errors.Join(errN, errE); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("key %q is not an RSA public key", k.Kid)
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	if len(keys) == 0 {
		return nil, errors.New("no RSA key")
	}
	return keys, nil
}

// cacheLifetime is how long an answer may be kept: Cache-Control's
// max-age less its Age; zero without one (the next check fetches again,
// at most once per certsRefetch for an unknown key ID).
func cacheLifetime(h http.Header) time.Duration {
	var maxAge int
	found := false
	for _, d := range strings.Split(h.Get("Cache-Control"), ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-store", "no-cache":
			return 0
		case "max-age":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return 0
			}
			maxAge, found = n, true
		}
	}
	if !found {
		return 0
	}
	if age, err := strconv.Atoi(h.Get("Age")); err == nil && age > 0 {
		maxAge -= age
	}
	return max(time.Duration(maxAge)*time.Second, 0)
}
