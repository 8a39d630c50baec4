package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// testCA signs certificates for the tests: the cluster's client CA.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, serial: 1}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a client certificate for pub, valid for life from a second
// ago, and returns it in PEM.
func (ca *testCA) issue(t *testing.T, subject pkix.Name, pub any, life time.Duration) []byte {
	t.Helper()
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject,
		NotBefore: now.Add(-time.Second), NotAfter: now.Add(life),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Error(err)
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// keyPair returns a certificate of ca for subject with a new key, as PEM
// and as a tls.Certificate.
func (ca *testCA) keyPair(t *testing.T, subject pkix.Name, life time.Duration) (certPEM, keyPEM []byte, pair *tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	certPEM = ca.issue(t, subject, &key.PublicKey, life)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, &c
}

// approver is what the fake API server does with a new CSR.
type approver int

const (
	approveAndIssue approver = iota // kube-controller-manager with the RBAC
	approveOnly                     // approved, never signed
	deny                            // denied by someone
	ignore                          // never approved: no ClusterRoleBinding
	forbid                          // the requester may not create CSRs
)

// fakeAPI is a fake clientset whose CSRs are handled as approver says,
// issuing certificates of ca that live life.
type fakeAPI struct {
	*fake.Clientset
	mu      sync.Mutex
	created []*certificatesv1.CertificateSigningRequest
}

func newFakeAPI(t *testing.T, ca *testCA, how approver, life time.Duration) *fakeAPI {
	f := &fakeAPI{Clientset: fake.NewClientset()}
	f.PrependReactor("create", "certificatesigningrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		req := action.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		if how == forbid {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}, "", nil)
		}
		req.Spec.Username = "system:serviceaccount:kip-system:kip"
		f.mu.Lock()
		f.created = append(f.created, req.DeepCopy())
		f.mu.Unlock()
		switch how {
		case approveAndIssue, approveOnly:
			req.Status.Conditions = append(req.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved"})
		case deny:
			req.Status.Conditions = append(req.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Nope", Message: "denied by a test"})
		}
		if how == approveAndIssue {
			block, _ := pem.Decode(req.Spec.Request)
			cr, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				return true, nil, err
			}
			req.Status.Certificate = ca.issue(t, cr.Subject, cr.PublicKey, life)
		}
		return false, nil, nil
	})
	return f
}

// requests returns the CSRs created so far.
func (f *fakeAPI) requests() []*certificatesv1.CertificateSigningRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*certificatesv1.CertificateSigningRequest(nil), f.created...)
}
