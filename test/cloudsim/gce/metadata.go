package gcesim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The metadata server of every simulated instance: an HTTP server on a
// unix socket (it reaches into a cell's network namespace where loopback
// would not), at the path the CellStarter chooses (simcells.IMDSLocator:
// localcells' {imds}), else in a directory of its own (MetadataSocket
// says where). It answers as Compute Engine's metadata server does
// (https://cloud.google.com/compute/docs/metadata/overview):
//
//   - every request must carry Metadata-Flavor: Google and no
//     X-Forwarded-For (403 otherwise), and every answer carries
//     Metadata-Flavor: Google;
//   - GET /computeMetadata/v1/ paths: instance/id, instance/name,
//     instance/hostname, instance/zone (projects/<number>/zones/<zone>),
//     instance/network-interfaces/0/ip, instance/attributes/ (the metadata
//     items' keys) and instance/attributes/<key>, project/project-id,
//     project/numeric-project-id, and
//     instance/service-accounts/default/identity?audience=&format=;
//     anything else is 404.
//
// The identity token is a JWT signed RS256 by the simulator's key, whose
// JWKS the simulator serves at /oauth2/v3/certs (IdentityCertsURL), as
// Google serves its keys at https://www.googleapis.com/oauth2/v3/certs,
// with Cache-Control max-age. Its claims are Google's: iss
// https://accounts.google.com, aud (the audience asked for; a request
// without one is 400), azp and sub (the service account's unique ID),
// email and email_verified, iat now and exp an hour later, and with
// format=full google.compute_engine {project_id, project_number, zone,
// instance_id, instance_name, instance_creation_timestamp}. An instance
// inserted without a service account has no token (404), as on Compute
// Engine.

// Identity token values, as Google's.
const (
	identityIssuer   = "https://accounts.google.com"
	identityLifetime = time.Hour
	// certsPath is where the simulator serves its JWKS.
	certsPath = "/oauth2/v3/certs"
	// certsMaxAge is the JWKS's Cache-Control max-age.
	certsMaxAge = time.Hour
)

// DefaultProjectNumber is the number of the simulated project
// (Options.ProjectNumber).
const DefaultProjectNumber = 123456789012

// identitySigner is the simulator's identity token key, made at first use
// (an RSA key takes a while; most tests never need one).
type identitySigner struct {
	once sync.Once
	key  *rsa.PrivateKey
	kid  string
	err  error
}

func (g *identitySigner) init() error {
	g.once.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			g.err = fmt.Errorf("making the identity token key: %w", err)
			return
		}
		sum := sha256.Sum256(key.N.Bytes())
		g.key, g.kid = key, hex.EncodeToString(sum[:20])
	})
	return g.err
}

// sign returns the JWT of claims, signed RS256.
func (g *identitySigner) sign(claims any) (string, error) {
	if err := g.init(); err != nil {
		return "", err
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "kid": g.kid, "typ": "JWT"})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encoding the identity token's claims: %w", err)
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, g.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the identity token: %w", err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// jwks is the key set (RFC 7517) as Google's certs URL answers it.
func (g *identitySigner) jwks() ([]byte, error) {
	if err := g.init(); err != nil {
		return nil, err
	}
	key := map[string]string{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": g.kid,
		"n": base64.RawURLEncoding.EncodeToString(g.key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(g.key.E)).Bytes()),
	}
	return json.Marshal(map[string]any{"keys": []any{key}})
}

// IdentityCertsURL is where the simulator serves the JWKS of the key
// that signs its instances' identity tokens (once it serves, Start): what
// a plugin verifying them is pointed at instead of Google's
// https://www.googleapis.com/oauth2/v3/certs.
func (s *Server) IdentityCertsURL() string { return s.URL() + certsPath }

// IdentityKey is the public key that signs the identity tokens and its
// key ID (the JWT header's kid). It panics if the key cannot be made (the
// system has no randomness).
func (s *Server) IdentityKey() (*rsa.PublicKey, string) {
	if err := s.signer.init(); err != nil {
		panic("gcesim: " + err.Error())
	}
	return &s.signer.key.PublicKey, s.signer.kid
}

// serveCerts answers GET /oauth2/v3/certs.
func (s *Server) serveCerts(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := s.signer.jwks()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(certsMaxAge/time.Second))+", must-revalidate, no-transform")
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(body)
}

// MetadataSocket returns the unix socket of the metadata server of the
// instance named name in zone, once it serves (from its insert until its
// cell has stopped).
func (s *Server) MetadataSocket(zone, name string) (string, bool) {
	return s.metadata.Path(metadataKey(instanceKey{zone, name}))
}

// metadataKey names an instance's metadata server (and its socket in the
// simulator's directory): zone.name, unambiguous since neither a zone nor
// an instance name has a dot.
func metadataKey(k instanceKey) string { return k.zone + "." + k.name }

// startMetadata serves the instance's metadata on its socket: where the
// CellStarter wants it, else in the simulator's directory. A failure is
// logged: the instance runs without metadata, which its cell will say.
// The caller holds s.mu.
func (s *Server) startMetadata(in *instance) {
	if err := s.metadata.Serve(metadataKey(in.key), s.cells.IMDSSocket(in.key.name), s.metadataHandler(in)); err != nil {
		s.log.Error("serving instance metadata failed", "instance", in.key.name, "zone", in.key.zone, "error", err)
	}
}

// metadataHandler answers the metadata requests of one instance.
func (s *Server) metadataHandler(in *instance) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		switch {
		case r.Header.Get("Metadata-Flavor") != "Google" || r.Header.Get("X-Forwarded-For") != "":
			metadataError(w, http.StatusForbidden, "Missing required header \"Metadata-Flavor\": \"Google\"")
			return
		case r.Method != http.MethodGet:
			metadataError(w, http.StatusMethodNotAllowed, "Method not allowed")
			return
		}
		path, ok := strings.CutPrefix(r.URL.Path, "/computeMetadata/v1/")
		if !ok {
			metadataError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.mu.Lock()
		body, status := s.metadataGet(in, path, r.URL.Query())
		s.mu.Unlock()
		if status != http.StatusOK {
			metadataError(w, status, body)
			return
		}
		w.Header().Set("Content-Type", "application/text")
		_, _ = w.Write([]byte(body)) //nolint:gosec // metadata of the simulated instance, for its own agent
	})
}

// metadataGet is the answer to a GET of path (after /computeMetadata/v1/):
// its body and status. The caller holds s.mu.
func (s *Server) metadataGet(in *instance, path string, q map[string][]string) (string, int) {
	if key, ok := strings.CutPrefix(path, "instance/attributes/"); ok {
		return metadataAttribute(in.body, key)
	}
	switch path {
	case "instance/service-accounts/default/identity":
		return s.identityToken(in, q)
	case "instance/id":
		return strconv.FormatUint(in.id, 10), http.StatusOK
	case "instance/name":
		return in.key.name, http.StatusOK
	case "instance/hostname":
		return in.key.name + "." + in.key.zone + ".c." + s.opts.Project + ".internal", http.StatusOK
	case "instance/zone":
		return "projects/" + strconv.FormatInt(s.opts.ProjectNumber, 10) + "/zones/" + in.key.zone, http.StatusOK
	case "instance/network-interfaces/0/ip":
		if in.cell.Address == "" {
			return "Not Found", http.StatusNotFound
		}
		return in.cell.Address, http.StatusOK
	case "project/project-id":
		return s.opts.Project, http.StatusOK
	case "project/numeric-project-id":
		return strconv.FormatInt(s.opts.ProjectNumber, 10), http.StatusOK
	}
	return "Not Found", http.StatusNotFound
}

// metadataAttribute answers instance/attributes/<key>, and the list of
// keys for instance/attributes/.
func metadataAttribute(body map[string]any, key string) (string, int) {
	md, _ := body["metadata"].(map[string]any)
	items, _ := md["items"].([]any)
	var keys []string
	for _, it := range items {
		kv, _ := it.(map[string]any)
		k, _ := kv["key"].(string)
		keys = append(keys, k)
		if k == key && key != "" {
			v, _ := kv["value"].(string)
			return v, http.StatusOK
		}
	}
	if key == "" {
		slices.Sort(keys)
		return strings.Join(keys, "\n") + "\n", http.StatusOK
	}
	return "Not Found", http.StatusNotFound
}

// identityToken answers instance/service-accounts/default/identity. The
// caller holds s.mu.
func (s *Server) identityToken(in *instance, q map[string][]string) (string, int) {
	audience, format := first(q["audience"]), first(q["format"])
	switch {
	case audience == "":
		return "non-empty audience parameter required", http.StatusBadRequest
	case format != "" && format != "standard" && format != "full":
		return "format must be standard or full", http.StatusBadRequest
	}
	email := serviceAccount(in.body)
	if email == "" {
		return "Not Found", http.StatusNotFound
	}
	if email == "default" {
		email = strconv.FormatInt(s.opts.ProjectNumber, 10) + "-compute@developer.gserviceaccount.com"
	}
	now := s.now()
	sum := sha256.Sum256([]byte(email))
	subject := new(big.Int).SetBytes(sum[:9]).String() // a unique ID: 21 digits or so
	claims := map[string]any{
		"iss": identityIssuer, "aud": audience, "azp": subject, "sub": subject,
		"email": email, "email_verified": true,
		"iat": now.Unix(), "exp": now.Add(identityLifetime).Unix(),
	}
	if format == "full" {
		claims["google"] = map[string]any{"compute_engine": map[string]any{
			"project_id": s.opts.Project, "project_number": s.opts.ProjectNumber,
			"zone": in.key.zone, "instance_id": strconv.FormatUint(in.id, 10), "instance_name": in.key.name,
			"instance_creation_timestamp": in.created.Unix(),
		}}
	}
	token, err := s.signer.sign(claims)
	if err != nil {
		s.log.Error("signing an identity token", "instance", in.key.name, "error", err)
		return "Internal Server Error", http.StatusInternalServerError
	}
	return token, http.StatusOK
}

// serviceAccount is the email of the instance's first service account
// (Compute Engine attaches at most one), or "".
func serviceAccount(body map[string]any) string {
	email, _ := firstItem(body, "serviceAccounts")["email"].(string)
	return email
}

// firstItem is the first object of the list m[key] of a decoded JSON
// resource (its nic0, its first service account), or nil.
func firstItem(m map[string]any, key string) map[string]any {
	items, _ := m[key].([]any)
	if len(items) == 0 {
		return nil
	}
	item, _ := items[0].(map[string]any)
	return item
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// metadataError answers an error as the metadata server does: the status
// and a line of text.
func metadataError(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text + "\n")) //nolint:gosec // plain text naming the error
}
