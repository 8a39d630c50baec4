package pki

import (
	"context"
	"crypto"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kipcell/kip/cell/api"
)

// DefaultJoinTokenTTL is the lifetime of a join token when Bootstrap is
// given none: long enough for a real instance to boot (the host's own
// default is tied to its boot timeout, host/cells).
const DefaultJoinTokenTTL = 30 * time.Minute

// Join tokens. A token is
//
//	kipjoin1.<base64url(cellID "." issued "." expiry "." nonce)>.<base64url(HMAC-SHA256)>
//
// keyed by a key derived from the CA's private key (HKDF), so that any
// host replica holding the CA verifies it without a store, after a restart
// too: it belongs to cellID, was issued at issued (Unix milliseconds) and
// expires at expiry (Unix seconds). Spending is what needs state, and the
// host keeps none: the CA remembers in memory which key each token was
// spent for, until it expires, and which key each cell was last seen
// joined with (SawJoined, Join), for api.MaxJoinTokenTTL; a token issued
// before a cell was seen joined is refused to any other key. A host that
// restarts learns the latter again from the cells themselves: it joins no
// cell before it has looked at it, and one that serves a certificate of
// this CA has joined.
const tokenPrefix = "kipjoin1."

// spent is the record of a token used for a join.
type spent struct {
	key     [sha256.Size]byte // of the public key it was spent for
	expires time.Time
}

// joined is the record of a cell seen joined.
type joined struct {
	key [sha256.Size]byte // of the public key its certificate is for
	at  time.Time
}

// JoinToken returns a new join token for cellID that expires after ttl
// (zero: DefaultJoinTokenTTL).
func (ca *CA) JoinToken(cellID string, ttl time.Duration) (string, error) {
	if !api.ValidCellID(cellID) {
		return "", fmt.Errorf("making join token for cell %q: cell ID is not a DNS label", cellID)
	}
	if ttl < 0 {
		return "", fmt.Errorf("making join token for cell %s: negative lifetime %s", cellID, ttl)
	}
	if ttl == 0 {
		ttl = DefaultJoinTokenTTL
	}
	if ttl > api.MaxJoinTokenTTL {
		return "", fmt.Errorf("making join token for cell %s: lifetime %s is longer than %s", cellID, ttl, api.MaxJoinTokenTTL)
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("making join token for cell %s: %w", cellID, err)
	}
	now := ca.now()
	payload := cellID + "." + strconv.FormatInt(now.UnixMilli(), 10) + "." + strconv.FormatInt(now.Add(ttl).Unix(), 10) + "." +
		base64.RawURLEncoding.EncodeToString(nonce)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(ca.tokenMAC(payload)), nil
}

// tokenMAC is the MAC of a token's payload.
func (ca *CA) tokenMAC(payload string) []byte {
	m := hmac.New(sha256.New, ca.tokenKey)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// tokenKey derives the key of the join tokens' MAC from the CA's key.
func tokenKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("deriving the join token key: %w", err)
	}
	k, err := hkdf.Key(sha256.New, der, nil, "kip join token v1", 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the join token key: %w", err)
	}
	return k, nil
}

// token is a join token's content.
type token struct {
	id      string // the payload, unique
	issued  time.Time
	expires time.Time
}

// checkToken verifies raw for cellID.
func (ca *CA) checkToken(cellID, raw string) (token, error) {
	bad := errors.New("not a join token")
	body, ok := strings.CutPrefix(raw, tokenPrefix)
	payloadB64, macB64, ok2 := strings.Cut(body, ".")
	if !ok || !ok2 {
		return token{}, bad
	}
	payload, err := base64.RawURLEncoding.DecodeString(payloadB64)
	mac, err2 := base64.RawURLEncoding.DecodeString(macB64)
	if err != nil || err2 != nil {
		return token{}, bad
	}
	if !hmac.Equal(mac, ca.tokenMAC(string(payload))) {
		return token{}, errors.New("the join token is not this cluster's")
	}
	parts := strings.Split(string(payload), ".")
	if len(parts) != 4 {
		return token{}, bad
	}
	if parts[0] != cellID {
		return token{}, fmt.Errorf("the join token is cell %s's", parts[0])
	}
	issued, err := strconv.ParseInt(parts[1], 10, 64)
	expires, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || err2 != nil {
		return token{}, bad
	}
	t := token{id: string(payload), issued: time.UnixMilli(issued), expires: time.Unix(expires, 0)}
	if !ca.now().Before(t.expires) {
		return token{}, fmt.Errorf("the join token expired at %s", t.expires.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// oidSubjectAltName is the only extension a cell's request may carry.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// Join checks a cell's join request and signs its certificate
// (SignCell, DefaultCellValidity). It refuses (api.ErrJoinRefused) a token
// that is not this CA's, is another cell's, has expired, was spent for
// another key, or was issued before the cell was seen joined with another
// key (SawJoined), and a certificate request that is not for req.PeerKey,
// not for cellID alone (common name empty or cellID, DNS names exactly
// cellID, no address, URI or e-mail name, no extension but the names) or
// not self-signed. check, if set, is asked last (the plugin's identity
// check); its error refuses the join too. The token is spent when the
// certificate is signed; a request with the same token and key again (an
// agent that crashed before it saved its certificate) gets a certificate
// again.
//
// What the CA remembers is in memory (see the tokens' comment above). A
// host that restarted, or another replica, accepts a token once more only
// for a cell it has not looked at since: the host joins no cell before it
// has (cellclient.Join), and reports each joined one it finds (SawJoined).
func (ca *CA) Join(ctx context.Context, cellID string, req api.JoinRequest, check func(context.Context) error) ([]byte, error) {
	tok, err := ca.checkToken(cellID, req.Token)
	if err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	csr, err := checkCSR(cellID, req)
	if err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	fp, err := keyFingerprint(csr.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	if err := ca.spendable(cellID, tok, fp); err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	if check != nil {
		if err := check(ctx); err != nil {
			return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
		}
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if err := ca.spendableLocked(cellID, tok, fp); err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	certPEM, err := ca.SignCell(cellID, csr.PublicKey, 0)
	if err != nil {
		return nil, err
	}
	now := ca.now()
	for k, s := range ca.spent {
		if !now.Before(s.expires) {
			delete(ca.spent, k)
		}
	}
	ca.spent[tok.id] = spent{key: fp, expires: tok.expires}
	ca.sawJoinedLocked(cellID, fp, now)
	return certPEM, nil
}

// SawJoined records that the agent of cellID serves a certificate of
// this CA for pub, as of now: a token of the cell issued before now is
// refused to any other key (Join). The host calls it for every joined
// cell it looks at, which is how a restarted host learns what it forgot.
func (ca *CA) SawJoined(cellID string, pub crypto.PublicKey) {
	fp, err := keyFingerprint(pub)
	if err != nil {
		return // a key the CA cannot have signed
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.sawJoinedLocked(cellID, fp, ca.now())
}

func (ca *CA) sawJoinedLocked(cellID string, fp [sha256.Size]byte, now time.Time) {
	for k, j := range ca.joined {
		if now.Sub(j.at) > api.MaxJoinTokenTTL {
			delete(ca.joined, k) // every token issued before has expired
		}
	}
	ca.joined[cellID] = joined{key: fp, at: now}
}

// spendable reports why tok may not be spent for the key fp.
func (ca *CA) spendable(cellID string, tok token, fp [sha256.Size]byte) error {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.spendableLocked(cellID, tok, fp)
}

func (ca *CA) spendableLocked(cellID string, tok token, fp [sha256.Size]byte) error {
	if s, ok := ca.spent[tok.id]; ok && s.key != fp {
		return errors.New("the join token was spent already, for another key")
	}
	if j, ok := ca.joined[cellID]; ok && j.key != fp && tok.issued.Before(j.at) {
		return errors.New("the cell has joined with another key since the join token was issued")
	}
	return nil
}

// checkCSR parses and checks a join request's certificate request.
func checkCSR(cellID string, req api.JoinRequest) (*x509.CertificateRequest, error) {
	csr, err := parseCSR(req.CSR)
	if err != nil {
		return nil, err
	}
	if !api.SamePublicKey(csr.PublicKey, req.PeerKey) {
		return nil, errors.New("the certificate request is not for the key the agent serves")
	}
	return csr, checkCSRNames(cellID, csr)
}

// parseCSR parses a certificate request and checks its signature.
func parseCSR(der []byte) (*x509.CertificateRequest, error) {
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	return csr, nil
}

// checkCSRNames checks that a certificate request is for cellID alone:
// common name empty or cellID, DNS names exactly cellID, no other name,
// no extension but the names.
func checkCSRNames(cellID string, csr *x509.CertificateRequest) error {
	if cn := csr.Subject.CommonName; cn != "" && cn != cellID {
		return fmt.Errorf("the certificate request names %q, not the cell", cn)
	}
	if !slices.Equal(csr.DNSNames, []string{cellID}) {
		return fmt.Errorf("the certificate request names %q, not the cell alone", csr.DNSNames)
	}
	if len(csr.IPAddresses) > 0 || len(csr.URIs) > 0 || len(csr.EmailAddresses) > 0 {
		return errors.New("the certificate request names addresses, URIs or e-mail addresses")
	}
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			return fmt.Errorf("the certificate request asks for extension %s", ext.Id)
		}
	}
	return nil
}

// keyFingerprint is the SHA-256 of a public key's DER.
func keyFingerprint(pub crypto.PublicKey) ([sha256.Size]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("encoding public key: %w", err)
	}
	return sha256.Sum256(der), nil
}
