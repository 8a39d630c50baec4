package azure

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/kipcell/kip/pluginapi"
)

// A private cloud's endpoint is reached with the CA bundle the
// configuration names, and nothing else: the provider has no transport of
// its own here, so the fake's self-signed certificate is trusted through
// caBundle alone.
func TestConfigureTrustsTheCABundle(t *testing.T) {
	f := newFakeARM(t)
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		bundle bool
	}{{"with caBundle", true}, {"without", false}} {
		p := New(slog.New(slog.DiscardHandler)).(*provider)
		p.retry = newProvider(f).retry
		cfg := testConfig(f)
		if tc.bundle {
			cfg["caBundle"] = bundle
		}
		_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, Config: mustJSON(t, cfg)})
		if tc.bundle != (err == nil) {
			t.Errorf("%s: Configure: %v", tc.name, err)
		}
	}
}

// The service principal's credentials are built from its secret or its
// certificate file; a file that holds no certificate names its key.
func TestCredential(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kip"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(cert, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...), 0o600); err != nil {
		t.Fatal(err)
	}
	guid := "11111111-2222-3333-4444-555555555555"
	s := &settings{creds: Credentials{TenantID: guid, ClientID: guid, ClientSecretFile: secret}}
	if c, err := credential(s); err != nil {
		t.Errorf("secret: %v", err)
	} else if _, ok := c.(*azidentity.ClientSecretCredential); !ok {
		t.Errorf("secret: a %T", c)
	}
	s.creds = Credentials{TenantID: guid, ClientID: guid, ClientCertificateFile: cert}
	if c, err := credential(s); err != nil {
		t.Errorf("certificate: %v", err)
	} else if _, ok := c.(*azidentity.ClientCertificateCredential); !ok {
		t.Errorf("certificate: a %T", c)
	}
	s.creds.ClientCertificateFile = secret
	var ic *pluginapi.InvalidConfigError
	if _, err := credential(s); !errors.As(err, &ic) || ic.Key != "credentials.clientCertificateFile" {
		t.Errorf("a certificate file without a certificate: %v; want InvalidConfig naming credentials.clientCertificateFile", err)
	}
}
