package aws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// identitySigner is a test stand-in for EC2's identity signing key and
// its public certificate.
type identitySigner struct {
	key     *rsa.PrivateKey
	certPEM []byte
}

func newIdentitySigner(t *testing.T) *identitySigner {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &identitySigner{key: key, certPEM: selfSigned(t, &key.PublicKey, key)}
}

// selfSigned is a self-signed certificate (PEM) of pub.
func selfSigned(t *testing.T, pub, priv any) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"Test Web Services"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// sign returns the base64 signature of doc, as EC2's signature path gives it.
func (s *identitySigner) sign(t *testing.T, doc []byte) []byte {
	t.Helper()
	digest := sha256.Sum256(doc)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	// EC2 wraps it over lines.
	enc := base64.StdEncoding.EncodeToString(sig)
	return []byte(enc[:64] + "\n" + enc[64:])
}

func document(instance, region, account, pending string) []byte {
	return []byte(`{"accountId":"` + account + `","architecture":"x86_64","availabilityZone":"` + region + `a","imageId":"ami-0abc",` +
		`"instanceId":"` + instance + `","instanceType":"t3.small","pendingTime":"` + pending + `","privateIp":"10.0.0.5",` +
		`"region":"` + region + `","version":"2017-09-30"}`)
}

func TestVerifyIdentity(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ec2Key := newIdentitySigner(t)
	other := newIdentitySigner(t)
	keys, err := parseIdentityCertificates(append(append([]byte{}, other.certPEM...), ec2Key.certPEM...))
	if err != nil {
		t.Fatal(err)
	}
	s := identitySettings{keys: keys}
	good := document("i-0abc", "us-east-1", "123456789012", "2026-11-24T11:58:00Z")
	tests := []struct {
		name      string
		settings  identitySettings
		doc, sig  []byte
		want      string // "" accepted
		unchecked bool
	}{
		{name: "the instance's own document", settings: s, doc: good, sig: ec2Key.sign(t, good)},
		{name: "signed by another key", settings: identitySettings{keys: keys[1:]}, doc: good, sig: other.sign(t, good), want: "not signed by any"},
		{name: "a changed document", settings: s, doc: []byte(strings.Replace(string(good), "10.0.0.5", "10.0.0.6", 1)), sig: ec2Key.sign(t, good), want: "not signed by any"},
		{name: "another instance's document", settings: s, doc: document("i-0def", "us-east-1", "123456789012", "2026-11-24T11:58:00Z"),
			sig: ec2Key.sign(t, document("i-0def", "us-east-1", "123456789012", "2026-11-24T11:58:00Z")), want: `instance "i-0def"'s, not i-0abc's`},
		{name: "another region", settings: s, doc: document("i-0abc", "eu-west-1", "123456789012", "2026-11-24T11:58:00Z"),
			sig: ec2Key.sign(t, document("i-0abc", "eu-west-1", "123456789012", "2026-11-24T11:58:00Z")), want: `region "eu-west-1"`},
		{name: "an account not allowed", settings: identitySettings{keys: keys, accounts: []string{"210987654321"}}, doc: good, sig: ec2Key.sign(t, good), want: `account "123456789012"`},
		{name: "an allowed account", settings: identitySettings{keys: keys, accounts: []string{"210987654321", "123456789012"}}, doc: good, sig: ec2Key.sign(t, good)},
		{name: "launched in the future", settings: s, doc: document("i-0abc", "us-east-1", "123456789012", "2026-11-24T12:30:00Z"),
			sig: ec2Key.sign(t, document("i-0abc", "us-east-1", "123456789012", "2026-11-24T12:30:00Z")), want: "in the future"},
		{name: "garbage, signed", settings: s, doc: []byte("garbage"), sig: ec2Key.sign(t, []byte("garbage")), want: "parsing the identity document"},
		{name: "a signature that is not base64", settings: s, doc: good, sig: []byte("%%%"), want: "not base64"},
		{name: "no document", settings: s, want: "sent no signed identity document"},
		{name: "no certificates configured", doc: []byte("garbage"), sig: []byte("garbage"), unchecked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := verifyIdentity(tt.settings, "us-east-1", &pluginapi.VerifyInstanceIdentityRequest{InstanceID: "i-0abc", Document: tt.doc, Signature: tt.sig}, now)
			switch {
			case tt.want != "":
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("verifyIdentity = %v, %v; want an error saying %q", resp, err, tt.want)
				}
			case err != nil:
				t.Fatalf("verifyIdentity = %v", err)
			case (resp.NotChecked != "") != tt.unchecked:
				t.Errorf("NotChecked = %q, want it said: %t", resp.NotChecked, tt.unchecked)
			}
		})
	}
}

func TestValidateIdentity(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rsaCert := write("rsa.pem", newIdentitySigner(t).certPEM)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecCert := write("ec.pem", selfSigned(t, &ec.PublicKey, ec))
	empty := write("empty.pem", []byte("no PEM here"))
	tests := []struct {
		name     string
		config   *IdentityConfig
		wantKey  string // "" valid
		wantKeys int
	}{
		{name: "none"},
		{name: "certificates", config: &IdentityConfig{Certificates: rsaCert, AccountIDs: []string{"123456789012"}}, wantKeys: 1},
		{name: "a missing file", config: &IdentityConfig{Certificates: filepath.Join(dir, "missing.pem")}, wantKey: "identity.certificates"},
		{name: "no certificate in the file", config: &IdentityConfig{Certificates: empty}, wantKey: "identity.certificates"},
		{name: "a certificate of another kind of key", config: &IdentityConfig{Certificates: ecCert}, wantKey: "identity.certificates"},
		{name: "a bad account", config: &IdentityConfig{Certificates: rsaCert, AccountIDs: []string{"12"}}, wantKey: "identity.accountIDs[0]"},
		{name: "accounts without certificates", config: &IdentityConfig{AccountIDs: []string{"123456789012"}}, wantKey: "identity.accountIDs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := validateIdentity(tt.config)
			if tt.wantKey != "" {
				var ic *pluginapi.InvalidConfigError
				if !errors.As(err, &ic) || ic.Key != tt.wantKey {
					t.Fatalf("validateIdentity = %v, want InvalidConfig of %s", err, tt.wantKey)
				}
				return
			}
			if err != nil || len(s.keys) != tt.wantKeys {
				t.Fatalf("validateIdentity = %d keys, %v; want %d", len(s.keys), err, tt.wantKeys)
			}
		})
	}
}
