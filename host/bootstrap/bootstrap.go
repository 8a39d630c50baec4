package bootstrap

import (
	"context"
	"crypto"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/keyutil"

	"github.com/kipcell/kip/host/kubeconfig"
)

// What the node's certificate is and where kip keeps it.
const (
	// NodesGroup is the certificate's organization, the group of every node.
	NodesGroup = "system:nodes"
	// storePrefix names the files in CertDir: kip-client-current.pem (a
	// link to the newest kip-client-<time>.pem, certificate and key).
	storePrefix = "kip-client"
	// pendingKeyFile keeps the key of a request not yet issued, so that a
	// restart asks again with the same key (and finds the same CSR).
	pendingKeyFile = storePrefix + ".key.tmp"
	// RBACFile grants the bootstrap identity and the nodes what the
	// bootstrap needs.
	RBACFile = "deploy/rbac/kip-bootstrap.yaml"
	// Signer is the signer a kubelet's client certificate comes from.
	Signer = certificatesv1.KubeAPIServerClientKubeletSignerName
)

// NewStore opens the certificate store in certDir as kip keeps it
// (client-go's file store: CurrentFile links to the newest pair).
func NewStore(certDir string) (certificate.FileStore, error) {
	store, err := certificate.NewFileStore(storePrefix, certDir, certDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("opening the certificate store in %s: %w", certDir, err)
	}
	return store, nil
}

// CurrentFile is the file in certDir that holds the current certificate
// and its key (PEM; a link to the newest kip-client-<time>.pem).
func CurrentFile(certDir string) string { return filepath.Join(certDir, storePrefix+"-current.pem") }

// User is the node's user name, the certificate's CN.
func User(nodeName string) string { return "system:node:" + nodeName }

// Manager keeps the node's client certificate current: it got the first
// one at Start and renews it before it expires. RESTConfig is the node's
// client configuration, which always presents the current certificate.
// When the renewals fail until the certificate expired, Expired says that
// kip must exit.
type Manager struct {
	nodeName string
	certDir  string
	certs    certificate.Manager
	config   *rest.Config
	dialer   *connrotation.Dialer
	cancel   context.CancelFunc
	done     chan struct{}
	expired  chan error
}

// deps is what Start builds with, replaced in tests.
type deps struct {
	// newClient makes the client of the bootstrap identity, and of the
	// node for renewals.
	newClient func(*rest.Config) (kubernetes.Interface, error)
	// rotationCheck is how often the transport looks for a new
	// certificate.
	rotationCheck time.Duration
}

func newClient(cfg *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(cfg) }

// NodeConfig starts a Manager for nodeName (Start) and returns the node's
// client configuration with it. Stop the Manager when kip ends.
func NodeConfig(ctx context.Context, cfg Config, nodeName string, log *slog.Logger) (*rest.Config, *Manager, error) {
	m, err := Start(ctx, cfg, nodeName, log)
	if err != nil {
		return nil, nil, err
	}
	return m.RESTConfig(), m, nil
}

// Start loads the bootstrap identity (cfg.Kubeconfig), takes the
// certificate of system:node:<nodeName> from cfg.CertDir while it is valid
// or else asks for one (a CSR approved and issued within
// cfg.ApprovalTimeout, or an error naming the likely cause), and starts
// renewing it. ctx bounds Start only; Stop ends the renewals.
func Start(ctx context.Context, cfg Config, nodeName string, log *slog.Logger) (*Manager, error) {
	identity, _, err := kubeconfig.Load("bootstrap.kubeconfig", cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return start(ctx, cfg, nodeName, identity, log, deps{newClient: newClient, rotationCheck: rotationCheck})
}

func start(ctx context.Context, cfg Config, nodeName string, identity *rest.Config, log *slog.Logger, d deps) (*Manager, error) {
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = DefaultApprovalTimeout
	}
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating bootstrap.certDir: %w", err)
	}
	store, err := NewStore(cfg.CertDir)
	if err != nil {
		return nil, err
	}
	if cert, why := usable(store, nodeName, time.Now()); cert != nil {
		log.Info("node client certificate reused", "dir", cfg.CertDir, "user", User(nodeName),
			"not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else {
		log.Info("requesting the node's client certificate", "reason", why, "user", User(nodeName), "signer", Signer)
		client, err := d.newClient(identity)
		if err != nil {
			return nil, fmt.Errorf("creating the bootstrap client: %w", err)
		}
		if err := requestFirst(ctx, client, store, cfg, nodeName, log); err != nil {
			return nil, err
		}
	}

	m := &Manager{nodeName: nodeName, certDir: cfg.CertDir, done: make(chan struct{}), expired: make(chan error, 1)}
	lifetime := cfg.CertificateLifetime
	m.certs, err = certificate.NewManager(&certificate.Config{
		// Renewals go as the node itself (selfnodeclient) while its
		// certificate is valid, as the kubelet's do; else as the
		// bootstrap identity (nodeclient).
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			if current != nil {
				return d.newClient(m.config)
			}
			return d.newClient(identity)
		},
		Template:                     template(nodeName),
		SignerName:                   Signer,
		GetUsages:                    certificate.DefaultKubeletClientGetUsages,
		RequestedCertificateLifetime: &lifetime,
		CertificateStore:             store,
		Name:                         "kip node client certificate",
	})
	if err != nil {
		return nil, fmt.Errorf("starting the certificate manager: %w", err)
	}
	m.config, m.dialer, err = rotatingConfig(rest.AnonymousClientConfig(identity), m.certs)
	if err != nil {
		return nil, err
	}
	var watchCtx context.Context
	watchCtx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.certs.Start()
	rot := newRotation(m.certs, m.dialer.CloseAll, exitAfter, time.Now(), log)
	go func() {
		defer close(m.done)
		failed := make(chan error, 1)
		watchRotation(watchCtx, rot, d.rotationCheck, failed)
		select {
		case err := <-failed:
			m.expired <- fmt.Errorf("%s in bootstrap.certDir %s: %w: kip exits, to start again and ask for a new one as its bootstrap identity (bootstrap.kubeconfig %s)",
				User(nodeName), cfg.CertDir, err, cfg.Kubeconfig)
		default:
		}
	}()
	return m, nil
}

// usable returns the certificate in store when it is the node's and valid
// at now, else nil and why not.
func usable(store certificate.Store, nodeName string, now time.Time) (*tls.Certificate, string) {
	cert, err := store.Current()
	var none *certificate.NoCertKeyError
	switch {
	case errors.As(err, &none):
		return nil, "no certificate in bootstrap.certDir"
	case err != nil:
		return nil, fmt.Sprintf("the certificate in bootstrap.certDir is unreadable (%v)", err)
	case cert.Leaf == nil:
		return nil, "the certificate in bootstrap.certDir is unparsable"
	case cert.Leaf.Subject.CommonName != User(nodeName) || !slices.Contains(cert.Leaf.Subject.Organization, NodesGroup):
		return nil, fmt.Sprintf("the certificate in bootstrap.certDir is for %s (groups %s), not %s", cert.Leaf.Subject.CommonName,
			strings.Join(cert.Leaf.Subject.Organization, ","), User(nodeName))
	case !now.Before(cert.Leaf.NotAfter):
		return nil, "the certificate in bootstrap.certDir expired " + cert.Leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	return cert, ""
}

// template is the request of the node's certificate, exactly what the
// csrapproving controller recognizes as a node client certificate: CN
// system:node:<name>, O system:nodes, no SANs.
func template(nodeName string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: User(nodeName), Organization: []string{NodesGroup}}}
}

// requestFirst asks for the node's first certificate as the bootstrap
// identity and stores it with its key, as the kubelet's bootstrap does
// (pkg/kubelet/certificate/bootstrap).
func requestFirst(ctx context.Context, client kubernetes.Interface, store certificate.Store, cfg Config, nodeName string, log *slog.Logger) error {
	keyPath := filepath.Join(cfg.CertDir, pendingKeyFile)
	keyPEM, _, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return fmt.Errorf("making the node's key in %s: %w", cfg.CertDir, err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return fmt.Errorf("reading the node's key %s: %w", keyPath, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("reading the node's key %s: %T is no signer", keyPath, key)
	}
	tmpl := template(nodeName)
	csrPEM, err := certutil.MakeCSRFromTemplate(key, tmpl)
	if err != nil {
		return fmt.Errorf("making the certificate request: %w", err)
	}
	usages := certificate.DefaultKubeletClientGetUsages(key)
	name, err := requestName(signer.Public(), tmpl.Subject, usages)
	if err != nil {
		return err
	}
	lifetime := cfg.CertificateLifetime
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name, Signer, &lifetime, usages, key)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("creating CertificateSigningRequest %s: the bootstrap identity (bootstrap.kubeconfig %s) may not create CertificateSigningRequests: bind it to ClusterRole system:node-bootstrapper (%s): %w",
				name, cfg.Kubeconfig, RBACFile, err)
		}
		return fmt.Errorf("creating CertificateSigningRequest %s: %w", name, err)
	}
	log.Info("certificate signing request created", "csr", reqName, "user", User(nodeName), "signer", Signer)
	wait, cancel := context.WithTimeout(ctx, cfg.ApprovalTimeout)
	defer cancel()
	certPEM, waitErr := csr.WaitForCertificate(wait, client, reqName, reqUID)
	if waitErr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the node's certificate (CSR %s): %w", reqName, ctx.Err())
		}
		check, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		got, err := client.CertificatesV1().CertificateSigningRequests().Get(check, reqName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("waiting for the node's certificate (CSR %s): %w", reqName, waitErr)
		}
		if len(got.Status.Certificate) == 0 || got.UID != reqUID {
			return notIssued(got, cfg.ApprovalTimeout, waitErr)
		}
		certPEM = got.Status.Certificate
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("storing the node's certificate in %s: %w", cfg.CertDir, err)
	}
	if err := os.Remove(keyPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("removing the pending key", "path", keyPath, "error", err)
	}
	log.Info("node client certificate issued", "csr", reqName, "user", User(nodeName), "dir", cfg.CertDir)
	return nil
}

// notIssued names the likely cause of a CSR that got no certificate, from
// its conditions; waitErr is what the wait saw.
func notIssued(req *certificatesv1.CertificateSigningRequest, timeout time.Duration, waitErr error) error {
	var approved bool
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return fmt.Errorf("CertificateSigningRequest %s for the node's certificate was denied (%s: %s): kube-controller-manager's csrapproving controller never denies; someone or another approver did: %w",
				req.Name, c.Reason, c.Message, waitErr)
		case certificatesv1.CertificateFailed:
			return fmt.Errorf("CertificateSigningRequest %s for the node's certificate failed (%s: %s): %w", req.Name, c.Reason, c.Message, waitErr)
		case certificatesv1.CertificateApproved:
			approved = true
		}
	}
	if approved {
		return fmt.Errorf("CertificateSigningRequest %s for the node's certificate was approved but not issued within %s: kube-controller-manager's csrsigning controller signs for %s only with --cluster-signing-cert-file and --cluster-signing-key-file (or the signer's own --cluster-signing-kube-apiserver-client-kubelet-* flags): %w",
			req.Name, timeout, Signer, waitErr)
	}
	return fmt.Errorf("CertificateSigningRequest %s for the node's certificate was not approved within %s: kube-controller-manager's csrapproving controller approves it only when its requester %s (groups %s) may create certificatesigningrequests/nodeclient; bind it to ClusterRole system:certificates.k8s.io:certificatesigningrequests:nodeclient (%s), or approve it by hand (kubectl certificate approve %s): %w",
		req.Name, timeout, req.Spec.Username, strings.Join(req.Spec.Groups, ","), RBACFile, req.Name, waitErr)
}

// requestName is the CSR's name, a digest of what it asks (the public
// key, the subject and the usages), as the kubelet names its own: a
// restart that asks again with the same key finds the same request.
func requestName(pub crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("naming the certificate request: %w", err)
	}
	h := sha512.New512_256()
	for _, part := range append([][]byte{der, []byte(subject.CommonName)}, organizationsAndUsages(subject, usages)...) {
		h.Write([]byte(base64.RawURLEncoding.EncodeToString(part)))
		h.Write([]byte{'|'})
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

func organizationsAndUsages(subject pkix.Name, usages []certificatesv1.KeyUsage) [][]byte {
	var parts [][]byte
	for _, o := range subject.Organization {
		parts = append(parts, []byte(o))
	}
	for _, u := range usages {
		parts = append(parts, []byte(u))
	}
	return parts
}

// RESTConfig returns a copy of the node's client configuration: the
// bootstrap identity's server and CA, and a transport that presents the
// current certificate on every new connection and closes the connections
// it opened when the certificate is renewed. Do not replace its Transport
// or Dial.
func (m *Manager) RESTConfig() *rest.Config { return rest.CopyConfig(m.config) }

// Stop ends the renewals and the transport's watch.
func (m *Manager) Stop() {
	m.certs.Stop()
	m.cancel()
	<-m.done
}

// Expired receives one error, wrapping ErrExpired, when the certificate
// expired and was not renewed (for 5 minutes, as the kubelet waits) while
// the API server answers: kip must then exit, as the kubelet does, so that
// it starts again and bootstraps anew. Nothing is received after Stop.
func (m *Manager) Expired() <-chan error { return m.expired }

// Check fails while there is no valid certificate (it expired and the
// renewal failed); for /healthz.
func (m *Manager) Check(context.Context) error {
	if m.certs.Current() == nil {
		return fmt.Errorf("no valid client certificate for %s in %s: it expired and its renewal failed (see the log)", User(m.nodeName), m.certDir)
	}
	return nil
}

// NotAfter is when the current certificate expires; zero when there is
// none that is valid.
func (m *Manager) NotAfter() time.Time {
	cert := m.certs.Current()
	if cert == nil || cert.Leaf == nil {
		return time.Time{}
	}
	return cert.Leaf.NotAfter
}

// Identity describes what the node presents, for messages: "a client
// certificate for system:node:kip in group system:nodes by TLS bootstrap
// (bootstrap.certDir /var/lib/kip/pki)".
func (m *Manager) Identity() string {
	return fmt.Sprintf("a client certificate for %s in group %s by TLS bootstrap (bootstrap.certDir %s)", User(m.nodeName), NodesGroup, m.certDir)
}
