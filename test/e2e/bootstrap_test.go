//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/keyutil"

	"github.com/kipcell/kip/host/bootstrap"
	"github.com/kipcell/kip/test/e2e/framework"
)

// startBootstrapKip runs kip for node with only a bootstrap identity (a
// ServiceAccount token, no node kubeconfig) in dir, on the cells' network
// n, and stops it and removes its node when the test ends.
func startBootstrapKip(t *testing.T, node, dir string, n int) *framework.Kip {
	t.Helper()
	k, err := f.StartKip(t.Context(), cells, framework.KipOptions{
		NodeName: node, Plugin: kip.Plugin, BinDir: kip.BinDir, Dir: dir, ClusterID: "e2e-" + node, Network: n,
		Bootstrap: true, Log: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, k)
	config, err := os.ReadFile(k.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(config), "\n") {
		if strings.HasPrefix(line, "kubeconfig:") {
			t.Fatalf("kip.yaml gives kip a node kubeconfig: %q", line)
		}
	}
	return k
}

// nodeCert is the certificate kip keeps in its bootstrap.certDir.
func nodeCert(t *testing.T, k *framework.Kip) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(bootstrap.CurrentFile(k.BootstrapCertDir()))
	if err != nil {
		t.Fatal(err)
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return cert
		}
	}
	t.Fatalf("no certificate in %s", bootstrap.CurrentFile(k.BootstrapCertDir()))
	return nil
}

// checkNodeCert checks that cert is node's, signed by the cluster CA for
// client auth.
func checkNodeCert(t *testing.T, cert *x509.Certificate, node string) {
	t.Helper()
	if cert.Subject.CommonName != "system:node:"+node || strings.Join(cert.Subject.Organization, ",") != "system:nodes" {
		t.Errorf("kip's certificate is for %s in %v; want system:node:%s in system:nodes", cert.Subject.CommonName, cert.Subject.Organization, node)
	}
	caPEM, err := os.ReadFile(f.Cluster.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("kip's certificate is no client certificate of the cluster CA: %v", err)
	}
}

// issuingCSR is the CSR whose issued certificate is cert.
func issuingCSR(t *testing.T, cert *x509.Certificate) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := f.Client.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range list.Items {
		block, _ := pem.Decode(req.Status.Certificate)
		if block != nil && bytes.Equal(block.Bytes, cert.Raw) {
			return &list.Items[i]
		}
	}
	t.Fatalf("no CertificateSigningRequest issued kip's certificate (serial %s) among %d", cert.SerialNumber, len(list.Items))
	return nil
}

// checkAutoApproved checks that req was asked for the kubelet client
// signer by user and approved by kube-controller-manager's approver.
func checkAutoApproved(t *testing.T, req *certificatesv1.CertificateSigningRequest, user, message string) {
	t.Helper()
	if req.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || req.Spec.Username != user {
		t.Errorf("CSR %s: signer %s, requester %s; want %s by %s", req.Name, req.Spec.SignerName, req.Spec.Username,
			certificatesv1.KubeAPIServerClientKubeletSignerName, user)
	}
	for _, c := range req.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Reason == "AutoApproved" && c.Message == message {
			return
		}
	}
	t.Errorf("CSR %s was not approved by the csrapproving controller (%q): %+v", req.Name, message, req.Status.Conditions)
}

// TestTLSBootstrapIdentity: kip given only its ServiceAccount's token gets
// the certificate of system:node:<name> through a CSR that
// kube-controller-manager approves because of deploy/rbac, registers its
// node with it, and runs a pod whose logs and exec go through it; its
// admin server reviews a reader's token as that node (the Node authorizer
// lets it create TokenReviews and SubjectAccessReviews, as the Deployment
// needs).
func TestTLSBootstrapIdentity(t *testing.T) {
	const node = "kip-boot"
	k := startBootstrapKip(t, node, t.TempDir(), 2)
	cert := nodeCert(t, k)
	checkNodeCert(t, cert, node)
	checkAutoApproved(t, issuingCSR(t, cert), "system:serviceaccount:"+framework.BootstrapNamespace+":"+framework.BootstrapServiceAccount,
		"Auto approving kubelet client certificate after SubjectAccessReview.")

	ns := f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, k, ns) })
	pod := runOn(t, ns, node, "boot")
	logsAndExec(t, ns, pod.Name)
	if got := scrape(t, k); got["kip_leader"] != 1 {
		t.Errorf("kip_leader = %v on the bootstrapped kip's /metrics, want 1", got["kip_leader"])
	}
}

// TestTLSBootstrapRenewal: kip restarted with a certificate of its node
// near its end in its certDir uses it, renews it before it expires, as the
// node itself (approved through selfnodeclient), and keeps working past
// the old certificate's end.
//
// The API's shortest certificate is 10 minutes, renewed at 70–90 % of its
// life: too long for a test. So the test issues the certificate kip
// starts with itself, from the cluster CA that kube-controller-manager
// signs with, living 105 s and 80 of them gone, which is what a
// certificate looks like near its end: client-go's renewal deadline, at
// 70–90 % of its life, falls between 6.5 s before kip starts and 14.5 s
// after, and leaves kip at least 10.5 s to renew before the end, as a
// certificate of any life would (10 % of 105 s); a test of 25 s, not 45.
// Everything after (the renewal deadline, the CSR, its approval, the
// signature, the new connections) is kip's, client-go's and the control
// plane's own.
func TestTLSBootstrapRenewal(t *testing.T) {
	const node = "kip-renew"
	dir := t.TempDir()
	seeded := seedNodeCert(t, filepath.Join(dir, "pki"), node, time.Now().Add(-80*time.Second), time.Now().Add(25*time.Second))
	k := startBootstrapKip(t, node, dir, 3)
	waitLogLine(t, k, "node client certificate reused")

	var renewed *x509.Certificate
	f.WaitFor(t, 90*time.Second, "kip to renew its certificate", func(context.Context) (bool, error) {
		renewed = nodeCert(t, k)
		return renewed.SerialNumber.Cmp(seeded.SerialNumber) != 0, nil
	})
	checkNodeCert(t, renewed, node)
	if !renewed.NotAfter.After(seeded.NotAfter) {
		t.Errorf("renewed certificate ends %v, not after the old one's %v", renewed.NotAfter, seeded.NotAfter)
	}
	checkAutoApproved(t, issuingCSR(t, renewed), "system:node:"+node, "Auto approving self kubelet client certificate after SubjectAccessReview.")
	waitLogLine(t, k, "node client certificate renewed: closing the connections")

	// Past the old certificate's end, only the new one is accepted: kip
	// renews its node Lease and runs a pod with logs and exec.
	time.Sleep(time.Until(seeded.NotAfter.Add(2 * time.Second)))
	f.WaitFor(t, 30*time.Second, "the node Lease renewed after the old certificate's end", func(ctx context.Context) (bool, error) {
		lease, err := f.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return false, nil //nolint:nilerr // not yet
		}
		return lease.Spec.RenewTime.After(seeded.NotAfter), nil
	})
	ns := f.Namespace(t)
	t.Cleanup(func() { deletePodsAndCells(t, k, ns) })
	pod := runOn(t, ns, node, "renewed")
	logsAndExec(t, ns, pod.Name)
}

// seedNodeCert writes into certDir, as kip keeps it, a certificate of
// node from the cluster CA valid from notBefore to notAfter.
func seedNodeCert(t *testing.T, certDir, node string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	pkiDir := filepath.Dir(f.Cluster.CAFile)
	caPEM, err := os.ReadFile(f.Cluster.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := keyutil.PrivateKeyFromFile(filepath.Join(pkiDir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := bootstrap.NewStore(certDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// logsAndExec checks kubectl logs and exec of pod, which the API server
// reaches through the node's kubelet API.
func logsAndExec(t *testing.T, ns, pod string) {
	t.Helper()
	f.WaitFor(t, 30*time.Second, "kubectl logs to show the container's output", func(context.Context) (bool, error) {
		out, code := kubectl(t, "logs", "-n", ns, pod)
		return code == 0 && strings.Contains(out, "hello from"), nil
	})
	out, code := kubectl(t, "exec", "-n", ns, pod, "--", "sh", "-c", "echo inside; exit 3")
	if code != 3 || !strings.Contains(out, "inside") {
		t.Errorf("kubectl exec = %q exit %d; want its output and exit code 3", out, code)
	}
}
