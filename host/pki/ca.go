package pki

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Where the cluster CA is kept by default, matching deploy/rbac.
const (
	DefaultNamespace  = "kip-system"
	DefaultSecretName = "kip-ca"
)

// The CA Secret's data keys, its type and its annotations. Load accepts a
// Secret of any type holding DataCert and DataKey, so an operator may
// provide the CA (for example with kubectl create secret generic); the
// Secrets Load creates have type SecretType.
const (
	DataCert = "ca.crt"
	DataKey  = "ca.key"

	SecretType corev1.SecretType = "kipcell.io/cluster-ca" //nolint:gosec // G101: a Secret type name, not a credential

	// AnnotationPurpose says what the Secret is (PurposeClusterCA), for
	// whoever finds it: deleting it cuts the host off from every cell.
	AnnotationPurpose = "kipcell.io/purpose"
	PurposeClusterCA  = "cluster-ca"
	// AnnotationCluster records the cluster ID the CA was created for.
	AnnotationCluster = "kipcell.io/cluster"
)

// Validities. A zero validity passed to SignCell or HostCertificate means
// the default; no certificate outlives the CA that signed it.
const (
	CAValidity          = 10 * 365 * 24 * time.Hour
	DefaultCellValidity = 30 * 24 * time.Hour
	DefaultHostValidity = 24 * time.Hour

	// backdate is subtracted from NotBefore so that a freshly booted cell
	// whose clock lags a little still accepts the certificates.
	backdate = 5 * time.Minute
)

// CA is the cluster certificate authority: it signs the cells' server
// certificates and the host's client certificate. It is safe for
// concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	now     func() time.Time

	tokenKey []byte // keys the join tokens' MAC (join.go)

	mu          sync.Mutex
	host        *tls.Certificate // nil until first HostCertificate
	hostRenewAt time.Time
	spent       map[string]spent  // join tokens spent, by token ID
	joined      map[string]joined // cells seen joined, by cell ID
}

// Option configures Load.
type Option func(*options)

type options struct {
	clusterID string
	now       func() time.Time
}

// WithClusterID names the cluster in the common name and annotations of a
// CA that Load creates. It does not affect a CA that already exists.
func WithClusterID(id string) Option { return func(o *options) { o.clusterID = id } }

// WithClock replaces time.Now, for tests that need to move time.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Load returns the cluster CA kept in the Secret namespace/name. If the
// Secret does not exist, Load creates a new CA (ECDSA P-256, valid for
// CAValidity) and stores it there; if another replica creates the Secret
// first, Load adopts the other's CA. Load never updates or overwrites an
// existing Secret: one that does not hold a valid, current CA certificate
// with its key is an error naming the Secret, left for an operator to fix.
func Load(ctx context.Context, client kubernetes.Interface, namespace, name string, opts ...Option) (*CA, error) {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	ref := namespace + "/" + name
	secrets := client.CoreV1().Secrets(namespace)

	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return fromSecret(s, ref, o.now)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading CA secret %s: %w", ref, err)
	}

	s, err = newCASecret(namespace, name, o)
	if err != nil {
		return nil, fmt.Errorf("generating CA for secret %s: %w", ref, err)
	}
	created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	switch {
	case err == nil:
		s = created
	case apierrors.IsAlreadyExists(err):
		// Another replica won the race; its CA is the cluster's.
		s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading CA secret %s created concurrently: %w", ref, err)
		}
	default:
		return nil, fmt.Errorf("creating CA secret %s: %w", ref, err)
	}
	return fromSecret(s, ref, o.now)
}

// fromSecret parses and validates the CA held in s.
func fromSecret(s *corev1.Secret, ref string, now func() time.Time) (*CA, error) {
	ca, err := parseCA(s.Data[DataCert], s.Data[DataKey], now)
	if err != nil {
		return nil, fmt.Errorf("loading CA secret %s: %w", ref, err)
	}
	return ca, nil
}

// parseCA checks that certPEM and keyPEM are a current CA certificate and
// its key. certPEM may hold further certificates (a chain); the first is
// the CA that signs.
func parseCA(certPEM, keyPEM []byte, now func() time.Time) (*CA, error) {
	switch {
	case len(certPEM) == 0:
		return nil, fmt.Errorf("no %s in secret", DataCert)
	case len(keyPEM) == 0:
		return nil, fmt.Errorf("no %s in secret", DataKey)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s and %s: %w", DataCert, DataKey, err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", DataCert, err)
		}
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key of type %T cannot sign", DataKey, pair.PrivateKey)
	}
	subject := cert.Subject.String()
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("%s: certificate %q is not a CA", DataCert, subject)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s: certificate %q may not sign certificates (no certSign key usage)", DataCert, subject)
	}
	t := now()
	if t.Before(cert.NotBefore) {
		return nil, fmt.Errorf("%s: certificate %q is not valid until %s", DataCert, subject, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if t.After(cert.NotAfter) {
		return nil, fmt.Errorf("%s: certificate %q expired at %s", DataCert, subject, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tk, err := tokenKey(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DataKey, err)
	}
	return &CA{cert: cert, key: key, certPEM: bytes.Clone(certPEM), now: now, tokenKey: tk, spent: map[string]spent{}, joined: map[string]joined{}}, nil
}

// newCASecret generates a CA and returns the Secret to store it in.
func newCASecret(namespace, name string, o options) (*corev1.Secret, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := o.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: strings.TrimSpace("kip-cluster-ca " + o.clusterID)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Annotations: map[string]string{
				AnnotationPurpose: PurposeClusterCA,
				AnnotationCluster: o.clusterID,
			},
		},
		Type: SecretType,
		Data: map[string][]byte{
			DataCert: encodeCert(der),
			DataKey:  keyPEM,
		},
	}, nil
}

// newSerial returns a random 128-bit serial number.
func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
