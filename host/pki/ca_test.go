package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kipcell/kip/cell/api/apitest"
	"github.com/kipcell/kip/test/fakeclock"
)

const (
	testNS   = "kip-system"
	testName = "kip-ca"
	testRef  = testNS + "/" + testName
)

// newFakeClock starts at a whole second, the resolution of certificate
// validity times.
func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Now().Truncate(time.Second)) }

// mustLoad loads a CA from a fresh fake clientset.
func mustLoad(t *testing.T, opts ...Option) *CA {
	t.Helper()
	ca, err := Load(t.Context(), fake.NewClientset(), testNS, testName, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// writeActions lists the actions on secrets that are not reads.
func writeActions(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "secrets" && a.GetVerb() != "get" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func TestLoadCreatesOnce(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	first, err := Load(ctx, client, testNS, testName, WithClusterID("c1"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Load(ctx, client, testNS, testName, WithClusterID("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CertPEM(), second.CertPEM()) {
		t.Error("second Load returned a different CA")
	}
	if diff := cmp.Diff([]string{"create"}, writeActions(client)); diff != "" {
		t.Errorf("writes to secrets (-want +got):\n%s", diff)
	}

	s, err := client.CoreV1().Secrets(testNS).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != SecretType {
		t.Errorf("secret type = %q, want %q", s.Type, SecretType)
	}
	wantAnn := map[string]string{AnnotationPurpose: PurposeClusterCA, AnnotationCluster: "c1"}
	if diff := cmp.Diff(wantAnn, s.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if !bytes.Equal(s.Data[DataCert], first.CertPEM()) {
		t.Error("secret's ca.crt is not the CA Load returned")
	}

	cert := first.cert
	if cert.Subject.CommonName != "kip-cluster-ca c1" {
		t.Errorf("CA common name = %q, want %q", cert.Subject.CommonName, "kip-cluster-ca c1")
	}
	if !cert.IsCA {
		t.Error("CA certificate is not a CA")
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key = %T, want ECDSA P-256", cert.PublicKey)
	}
	if life := time.Until(cert.NotAfter); life < CAValidity-time.Hour || life > CAValidity {
		t.Errorf("CA valid for %s more, want about %s", life, CAValidity)
	}
}

func TestLoadAdoptsRaceWinner(t *testing.T) {
	winner, err := newCASecret(testNS, testName, options{clusterID: "c1", now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	// Another replica creates the Secret between our Get and our Create.
	client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if err := client.Tracker().Add(winner.DeepCopy()); err != nil {
			t.Errorf("adding the winner's secret: %v", err)
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, testName)
	})
	ca, err := Load(t.Context(), client, testNS, testName)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca.CertPEM(), winner.Data[DataCert]) {
		t.Error("Load did not adopt the CA of the replica that won the race")
	}
	if diff := cmp.Diff([]string{"create"}, writeActions(client)); diff != "" {
		t.Errorf("writes to secrets (-want +got):\n%s", diff)
	}
}

func TestLoadAPIErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, testName, nil)
	tests := []struct {
		name string
		verb string
		want string
	}{
		{name: "get refused", verb: "get", want: "reading CA secret " + testRef},
		{name: "create refused", verb: "create", want: "creating CA secret " + testRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor(tt.verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, forbidden
			})
			_, err := Load(t.Context(), client, testNS, testName)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !apierrors.IsForbidden(err) {
				t.Fatalf("Load error = %v, want a Forbidden error containing %q", err, tt.want)
			}
		})
	}
}

// caPEM makes a self-signed certificate and key (PEM) from the template
// changed by mods; unchanged, a valid CA.
func caPEM(t *testing.T, mods ...apitest.Template) (certPEM, keyPEM []byte) {
	t.Helper()
	ca := apitest.NewCA(t, mods...)
	return ca.PEM, ca.KeyPEM
}

func TestLoadRejectsBadSecret(t *testing.T) {
	goodCert, goodKey := caPEM(t)
	_, otherKey := caPEM(t)
	leafCert, leafKey := caPEM(t, func(c *x509.Certificate) {
		c.IsCA = false
		c.KeyUsage = x509.KeyUsageDigitalSignature
	})
	noSignCert, noSignKey := caPEM(t, func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature })
	expiredCert, expiredKey := caPEM(t, func(c *x509.Certificate) {
		c.NotBefore = time.Now().Add(-2 * time.Hour)
		c.NotAfter = time.Now().Add(-time.Hour)
	})
	futureCert, futureKey := caPEM(t, func(c *x509.Certificate) {
		c.NotBefore = time.Now().Add(time.Hour)
		c.NotAfter = time.Now().Add(2 * time.Hour)
	})

	tests := []struct {
		name string
		data map[string][]byte
		want string
	}{
		{name: "empty", data: nil, want: "no ca.crt"},
		{name: "no key", data: map[string][]byte{DataCert: goodCert}, want: "no ca.key"},
		{name: "certificate not PEM", data: map[string][]byte{DataCert: []byte("garbage"), DataKey: goodKey}, want: "parsing ca.crt and ca.key"},
		{name: "key not PEM", data: map[string][]byte{DataCert: goodCert, DataKey: []byte("garbage")}, want: "parsing ca.crt and ca.key"},
		{name: "key does not match", data: map[string][]byte{DataCert: goodCert, DataKey: otherKey}, want: "does not match"},
		{name: "not a CA", data: map[string][]byte{DataCert: leafCert, DataKey: leafKey}, want: "is not a CA"},
		{name: "CA that may not sign", data: map[string][]byte{DataCert: noSignCert, DataKey: noSignKey}, want: "may not sign"},
		{name: "expired", data: map[string][]byte{DataCert: expiredCert, DataKey: expiredKey}, want: "expired at"},
		{name: "not yet valid", data: map[string][]byte{DataCert: futureCert, DataKey: futureKey}, want: "not valid until"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName},
				Type:       corev1.SecretTypeOpaque,
				Data:       tt.data,
			}
			client := fake.NewClientset(orig.DeepCopy())
			_, err := Load(t.Context(), client, testNS, testName)
			if err == nil {
				t.Fatal("Load accepted the secret")
			}
			if msg := err.Error(); !strings.Contains(msg, "CA secret "+testRef) || !strings.Contains(msg, tt.want) {
				t.Errorf("Load error = %q, want one naming %s and containing %q", msg, testRef, tt.want)
			}
			if w := writeActions(client); len(w) != 0 {
				t.Errorf("Load wrote to secrets: %v", w)
			}
			got, err := client.CoreV1().Secrets(testNS).Get(t.Context(), testName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(orig.Data, got.Data); diff != "" {
				t.Errorf("secret changed (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("operator-provided CA is accepted", func(t *testing.T) {
		client := fake.NewClientset(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName},
			Data:       map[string][]byte{DataCert: goodCert, DataKey: goodKey},
		})
		ca, err := Load(t.Context(), client, testNS, testName)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ca.CertPEM(), goodCert) {
			t.Error("Load did not return the operator's CA")
		}
	})
}
