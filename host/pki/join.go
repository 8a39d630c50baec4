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
//	kipjoin1.<base64url(cellID "." expiry "." nonce)>.<base64url(HMAC-SHA256)>
//
// keyed by a key derived from the CA's private key (HKDF), so that any
// host replica holding the CA verifies it without a store, after a restart
// too: it belongs to cellID and expires at expiry (Unix seconds). Spending
// is what needs state: the CA remembers, in memory until the token
// expires, which key each token was spent for. A host that restarts
// forgets that; what a forgotten token still allows is bounded below
// (Join).
const tokenPrefix = "kipjoin1."

// spent is the record of a token used for a join.
type spent struct {
	key     [sha256.Size]byte // of the public key it was spent for
	expires time.Time
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
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("making join token for cell %s: %w", cellID, err)
	}
	payload := cellID + "." + strconv.FormatInt(ca.now().Add(ttl).Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(nonce)
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

// checkToken verifies token for cellID and returns its ID (the payload)
// and expiry.
func (ca *CA) checkToken(cellID, token string) (string, time.Time, error) {
	body, ok := strings.CutPrefix(token, tokenPrefix)
	payloadB64, macB64, ok2 := strings.Cut(body, ".")
	if !ok || !ok2 {
		return "", time.Time{}, errors.New("not a join token")
	}
	payload, err := base64.RawURLEncoding.DecodeString(payloadB64)
	mac, err2 := base64.RawURLEncoding.DecodeString(macB64)
	if err != nil || err2 != nil {
		return "", time.Time{}, errors.New("not a join token")
	}
	if !hmac.Equal(mac, ca.tokenMAC(string(payload))) {
		return "", time.Time{}, errors.New("the join token is not this cluster's")
	}
	parts := strings.Split(string(payload), ".")
	if len(parts) != 3 {
		return "", time.Time{}, errors.New("not a join token")
	}
	if parts[0] != cellID {
		return "", time.Time{}, fmt.Errorf("the join token is cell %s's", parts[0])
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", time.Time{}, errors.New("not a join token")
	}
	expires := time.Unix(unix, 0)
	if !ca.now().Before(expires) {
		return "", time.Time{}, fmt.Errorf("the join token expired at %s", expires.UTC().Format(time.RFC3339))
	}
	return string(payload), expires, nil
}

// oidSubjectAltName is the only extension a cell's request may carry.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// Join checks a cell's join request and signs its certificate
// (SignCell, DefaultCellValidity). It refuses (api.ErrJoinRefused) a token
// that is not this CA's, is another cell's, has expired or was spent for
// another key, and a certificate request that is not for req.PeerKey, not
// for cellID alone (common name empty or cellID, DNS names exactly
// cellID, no address, URI or e-mail name, no extension but the names) or
// not self-signed. check, if set, is asked last (the plugin's identity
// check); its error refuses the join too. The token is spent when the
// certificate is signed; a request with the same token and key again (an
// agent that crashed before it saved its certificate) gets a certificate
// again.
//
// Spending is remembered in memory, until the token expires: a host that
// restarted (or another replica) accepts a token spent before once more,
// for the same cell only, until it expires. The host joins only a cell
// that does not already serve a certificate of this CA, so this needs an
// agent at the cell's address that lost its key and the token from the
// cell's user data, within the token's lifetime.
func (ca *CA) Join(ctx context.Context, cellID string, req api.JoinRequest, check func(context.Context) error) ([]byte, error) {
	id, expires, err := ca.checkToken(cellID, req.Token)
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
	if err := ca.spendable(id, fp); err != nil {
		return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
	}
	if check != nil {
		if err := check(ctx); err != nil {
			return nil, fmt.Errorf("%w: cell %s: %w", api.ErrJoinRefused, cellID, err)
		}
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if err := ca.spendableLocked(id, fp); err != nil {
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
	ca.spent[id] = spent{key: fp, expires: expires}
	return certPEM, nil
}

// spendable reports why the token id may not be spent for the key fp.
func (ca *CA) spendable(id string, fp [sha256.Size]byte) error {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.spendableLocked(id, fp)
}

func (ca *CA) spendableLocked(id string, fp [sha256.Size]byte) error {
	if s, ok := ca.spent[id]; ok && s.key != fp {
		return errors.New("the join token was spent already, for another key")
	}
	return nil
}

// checkCSR parses and checks a join request's certificate request.
func checkCSR(cellID string, req api.JoinRequest) (*x509.CertificateRequest, error) {
	csr, err := x509.ParseCertificateRequest(req.CSR)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if !api.SamePublicKey(csr.PublicKey, req.PeerKey) {
		return nil, errors.New("the certificate request is not for the key the agent serves")
	}
	if cn := csr.Subject.CommonName; cn != "" && cn != cellID {
		return nil, fmt.Errorf("the certificate request names %q, not the cell", cn)
	}
	if !slices.Equal(csr.DNSNames, []string{cellID}) {
		return nil, fmt.Errorf("the certificate request names %q, not the cell alone", csr.DNSNames)
	}
	if len(csr.IPAddresses) > 0 || len(csr.URIs) > 0 || len(csr.EmailAddresses) > 0 {
		return nil, errors.New("the certificate request names addresses, URIs or e-mail addresses")
	}
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			return nil, fmt.Errorf("the certificate request asks for extension %s", ext.Id)
		}
	}
	return csr, nil
}

// keyFingerprint is the SHA-256 of a public key's DER.
func keyFingerprint(pub crypto.PublicKey) ([sha256.Size]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("encoding public key: %w", err)
	}
	return sha256.Sum256(der), nil
}
