package aws

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Instance identity (capability instance-identity): before the host signs
// a cell's certificate it asks whether the identity the cell's agent read
// from instance metadata is the instance's. EC2 signs each instance's
// identity document (/latest/dynamic/instance-identity/document) with a
// key of its region; /latest/dynamic/instance-identity/signature is the
// base64 of the RSA (PKCS #1 v1.5) signature of the document's SHA-256,
// which AWS's public RSA certificate of the region verifies (EC2 User
// Guide, "Verify the instance identity document", the base64-encoded
// signature). The certificates are not in the plugin: the operator copies
// those of the regions in use from the guide's "AWS public certificates"
// page into a PEM file named by identity.certificates. Without it the
// plugin does not check, and says so (NotChecked, and a log line at
// Configure): cells still join with their token.

// IdentityConfig is the identity section of the plugin's configuration.
type IdentityConfig struct {
	Certificates string   `json:"certificates,omitempty" doc:"Path of a PEM file of AWS's public RSA certificates for instance identity signatures, one per region in use (EC2 User Guide, AWS public certificates)."`
	AccountIDs   []string `json:"accountIDs,omitempty" pattern:"^[0-9]{12}$" doc:"The AWS accounts a cell's instance may be in; empty: any."`
}

// identitySettings is an IdentityConfig checked: the certificates' keys.
type identitySettings struct {
	keys     []*rsa.PublicKey // none: no check
	accounts []string
}

// clockSkew is how far in the future an identity's pendingTime may be:
// the host's clock and EC2's differ a little.
const clockSkew = 5 * time.Minute

var accountRE = pluginapi.ConfigPattern(Config{}, "identity.accountIDs")

// validateIdentity checks c, reading its certificate file.
func validateIdentity(c *IdentityConfig) (identitySettings, error) {
	var s identitySettings
	if c == nil {
		return s, nil
	}
	for i, a := range c.AccountIDs {
		if !accountRE.MatchString(a) {
			return s, pluginapi.NewInvalidConfig(fmt.Sprintf("identity.accountIDs[%d]", i), "%q is not an AWS account ID (12 digits)", a)
		}
	}
	s.accounts = c.AccountIDs
	if c.Certificates == "" {
		if len(c.AccountIDs) > 0 {
			return s, pluginapi.NewInvalidConfig("identity.accountIDs", "needs identity.certificates: without them no identity is checked")
		}
		return s, nil
	}
	data, err := os.ReadFile(c.Certificates)
	if err != nil {
		return s, pluginapi.NewInvalidConfig("identity.certificates", "%v", err)
	}
	if s.keys, err = parseIdentityCertificates(data); err != nil {
		return s, pluginapi.NewInvalidConfig("identity.certificates", "%s: %v", c.Certificates, err)
	}
	return s, nil
}

// parseIdentityCertificates returns the RSA keys of the certificates in
// a PEM document. AWS's certificates are self-signed and some have
// expired: they are trusted as keys, as AWS's own procedure does
// (openssl -noverify).
func parseIdentityCertificates(data []byte) ([]*rsa.PublicKey, error) {
	var keys []*rsa.PublicKey
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate %d: %w", len(keys)+1, err)
		}
		key, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("certificate %q has a %T key, not RSA: use the RSA certificates (for the signature path), not the DSA or RSA-2048 ones", cert.Subject, cert.PublicKey)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return keys, nil
}

// identityDocument is what the check reads of EC2's instance identity
// document.
type identityDocument struct {
	InstanceID  string `json:"instanceId"`
	Region      string `json:"region"`
	AccountID   string `json:"accountId"`
	PendingTime string `json:"pendingTime"`
}

// VerifyInstanceIdentity checks a cell's instance identity document
// against AWS's signature (pluginapi.InstanceIdentityVerifier): signed by
// one of the configured certificates' keys, for the instance asked about,
// in the configured region and (when set) one of the accounts, launched
// no later than now. Without identity.certificates it answers NotChecked.
func (p *provider) VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	cfg, err := p.cfg.Ready(ctx)
	if err != nil {
		return nil, err
	}
	return verifyIdentity(cfg.identity, cfg.region, req, p.Now())
}

// verifyIdentity is VerifyInstanceIdentity for the settings s of region.
func verifyIdentity(s identitySettings, region string, req *pluginapi.VerifyInstanceIdentityRequest, now time.Time) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	if len(s.keys) == 0 {
		return &pluginapi.VerifyInstanceIdentityResponse{NotChecked: "identity.certificates is not set in the aws plugin's configuration"}, nil
	}
	if len(req.Document) == 0 || len(req.Signature) == 0 {
		return nil, fmt.Errorf("instance %s sent no signed identity document (its agent reads none from instance metadata)", req.InstanceID)
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(req.Signature), nil)))
	if err != nil {
		return nil, fmt.Errorf("the identity signature of instance %s is not base64: %w", req.InstanceID, err)
	}
	digest := sha256.Sum256(req.Document)
	if !slices.ContainsFunc(s.keys, func(k *rsa.PublicKey) bool {
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	}) {
		return nil, fmt.Errorf("the identity document of instance %s is not signed by any of the configured AWS certificates", req.InstanceID)
	}
	var doc identityDocument
	if err := json.Unmarshal(req.Document, &doc); err != nil {
		return nil, fmt.Errorf("parsing the identity document of instance %s: %w", req.InstanceID, err)
	}
	switch {
	case doc.InstanceID != req.InstanceID:
		return nil, fmt.Errorf("the identity document is instance %q's, not %s's", doc.InstanceID, req.InstanceID)
	case doc.Region != region:
		return nil, fmt.Errorf("the identity document of instance %s is from region %q, not %s", req.InstanceID, doc.Region, region)
	case len(s.accounts) > 0 && !slices.Contains(s.accounts, doc.AccountID):
		return nil, fmt.Errorf("the identity document of instance %s is from account %q, not one of identity.accountIDs", req.InstanceID, doc.AccountID)
	}
	pending, err := time.Parse(time.RFC3339, doc.PendingTime)
	if err != nil {
		return nil, fmt.Errorf("the identity document of instance %s has pendingTime %q: %w", req.InstanceID, doc.PendingTime, err)
	}
	if pending.After(now.Add(clockSkew)) {
		return nil, fmt.Errorf("the identity document of instance %s says it launched at %s, in the future", req.InstanceID, doc.PendingTime)
	}
	return &pluginapi.VerifyInstanceIdentityResponse{}, nil
}
