package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kipcell/kip/host/kubeconfig"
	"github.com/kipcell/kip/host/pki"
	"github.com/kipcell/kip/host/serviceenv"
)

// What kip does with the API server before it runs, and how long it waits.
const (
	// preflightTimeout bounds the first request, so that a server that
	// accepts connections and never answers is reported as unreachable.
	preflightTimeout = 30 * time.Second
	// podSyncTimeout bounds the first sync of the cache of the node's pods,
	// and that of the Services.
	podSyncTimeout = 2 * time.Minute
	// caRBAC is the file that grants kip the CA Secret.
	caRBAC = "deploy/rbac/kip-ca-secret.yaml"
	// servicesRBAC is the file that grants kip the EndpointSlices.
	servicesRBAC = "deploy/rbac/kip-endpointslices.yaml"
)

// apiServer says, as a user would look for it, how kip reaches the API
// server: the URL, where that came from and the identity kip presents. Its
// explain turns an error from a request into one that names what to fix.
type apiServer struct {
	url        string   // rest.Config Host
	kubeconfig string   // where the configuration came from (kubeconfig.Load)
	identity   identity // what kip presents
}

func newAPIServer(cfg *rest.Config, source string) apiServer {
	return apiServer{url: cfg.Host, kubeconfig: source, identity: identityOf(cfg, time.Now())}
}

// identity is what kip presents to the API server.
type identity struct {
	// desc names it: "a client certificate for system:node:kip in group
	// system:nodes", "a bearer token", "no credentials (anonymous)".
	desc string
	// hint says what to check when the API server rejects it (401).
	hint string
}

// identityOf describes the credentials in cfg as the API server will see
// them; it never prints a secret.
func identityOf(cfg *rest.Config, now time.Time) identity {
	var parts, hints []string
	switch {
	case len(cfg.CertData) > 0:
		desc, hint := describeCert(cfg.CertData, now)
		parts, hints = append(parts, desc), append(hints, hint)
	case cfg.CertFile != "":
		data, err := os.ReadFile(cfg.CertFile)
		if err != nil {
			parts = append(parts, fmt.Sprintf("the client certificate in %s (unreadable: %v)", cfg.CertFile, err))
			hints = append(hints, "make the certificate file readable")
			break
		}
		desc, hint := describeCert(data, now)
		parts, hints = append(parts, desc+" (file "+cfg.CertFile+")"), append(hints, hint)
	}
	switch {
	case cfg.BearerTokenFile == kubeconfig.InClusterTokenFile:
		parts = append(parts, "the service account token in "+cfg.BearerTokenFile+tokenSubject(cfg.BearerToken))
		hints = append(hints, "check that the service account token is mounted and current")
	case cfg.BearerTokenFile != "":
		token, _ := os.ReadFile(cfg.BearerTokenFile)
		parts = append(parts, "the bearer token in "+cfg.BearerTokenFile+tokenSubject(strings.TrimSpace(string(token))))
		hints = append(hints, "check that the token is valid and unexpired")
	case cfg.BearerToken != "":
		parts = append(parts, "a bearer token"+tokenSubject(cfg.BearerToken))
		hints = append(hints, "check that the token is valid and unexpired")
	}
	if cfg.ExecProvider != nil {
		parts = append(parts, fmt.Sprintf("credentials from the exec plugin %q", cfg.ExecProvider.Command))
		hints = append(hints, "check the credentials that plugin prints")
	}
	if cfg.AuthProvider != nil {
		parts = append(parts, fmt.Sprintf("credentials from the auth-provider plugin %q", cfg.AuthProvider.Name))
		hints = append(hints, "refresh that plugin's login")
	}
	if cfg.Username != "" {
		parts = append(parts, fmt.Sprintf("basic-auth user %q", cfg.Username))
		hints = append(hints, "the API server no longer accepts basic auth: use a client certificate or a token")
	}
	if len(parts) == 0 {
		return identity{
			desc: "no credentials (anonymous, system:anonymous)",
			hint: "the API server does not take anonymous requests: give the kubeconfig a user, ideally the node's own (system:node:<nodeName>)",
		}
	}
	desc := strings.Join(parts, " and ")
	if imp := cfg.Impersonate; imp.UserName != "" {
		desc += fmt.Sprintf(", impersonating %q", imp.UserName)
		if len(imp.Groups) > 0 {
			desc += " in groups " + strings.Join(imp.Groups, ", ")
		}
	}
	return identity{desc: desc, hint: strings.Join(hints, "; ")}
}

// describeCert names the user and groups of the first certificate in
// pemData, as the API server's x509 authenticator reads them (CN and O).
func describeCert(pemData []byte, now time.Time) (desc, hint string) {
	const check = "check that it is signed by the cluster's client CA and still valid"
	block, rest := pem.Decode(pemData)
	for block != nil && block.Type != "CERTIFICATE" {
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		return "a client certificate (not PEM)", check
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Sprintf("a client certificate (unparsable: %v)", err), check
	}
	desc = fmt.Sprintf("a client certificate for %s", cert.Subject.CommonName)
	switch len(cert.Subject.Organization) {
	case 0:
	case 1:
		desc += " in group " + cert.Subject.Organization[0]
	default:
		desc += " in groups " + strings.Join(cert.Subject.Organization, ", ")
	}
	switch {
	case now.After(cert.NotAfter):
		desc += fmt.Sprintf(" that expired %s", cert.NotAfter.UTC().Format(time.RFC3339))
		hint = "renew the certificate"
	case now.Before(cert.NotBefore):
		desc += fmt.Sprintf(" not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
		hint = "check this machine's clock"
	default:
		hint = "check that it is signed by the cluster's client CA"
	}
	return desc, hint
}

// tokenSubject returns " for <sub>" when token is a JWT (a service account
// token is), read without verification only to name it; else "".
func tokenSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Sub == "" {
		return ""
	}
	return " for " + claims.Sub
}

// request is one API request kip makes, named as RBAC names it.
type request struct {
	verb, resource  string
	namespace, name string // namespace "" is all namespaces
	fieldSelector   string
	grant           string // what to do when it is forbidden
}

func (r request) String() string {
	s := r.verb + " " + r.resource
	if r.name != "" {
		s += fmt.Sprintf(" %q", r.name)
	}
	if r.namespace == "" {
		s += " in all namespaces"
	} else {
		s += " in namespace " + r.namespace
	}
	if r.fieldSelector != "" {
		s += " with field selector " + r.fieldSelector
	}
	return s
}

// requestError carries the request an error came from, so that explain can
// name it without reading the error's text. Its text is the error's own.
type requestError struct {
	req request
	err error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

func tag(req request, err error) error {
	if err == nil {
		return nil
	}
	return &requestError{req: req, err: err}
}

// failure is what went wrong between kip and the API server.
type failure int

const (
	failOther           failure = iota // the server answered with another error, or no request was made
	failUnreachable                    // no answer: connection refused, DNS, timeout, connection dropped
	failTLS                            // the TLS handshake with the server failed
	failUnauthenticated                // 401: the server does not accept kip's credentials
	failForbidden                      // 403: the server knows kip's identity and refuses the request
)

func classify(err error) failure {
	switch {
	case apierrors.IsUnauthorized(err):
		return failUnauthenticated
	case apierrors.IsForbidden(err):
		return failForbidden
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return failOther
	}
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		header    tls.RecordHeaderError
		alert     tls.AlertError
	)
	if errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &header) || errors.As(err, &alert) {
		return failTLS
	}
	var (
		dns *net.DNSError
		op  *net.OpError
		ue  *url.Error
	)
	if errors.As(err, &dns) || errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) {
		return failUnreachable
	}
	if errors.As(err, &ue) && (ue.Timeout() || errors.Is(ue.Err, io.EOF) || errors.Is(ue.Err, io.ErrUnexpectedEOF)) {
		return failUnreachable
	}
	return failOther
}

// explain wraps err, from what kip was doing (a gerund phrase), so that it
// names what to fix: the URL and kubeconfig when the server cannot be
// reached, the identity when it is not accepted, the request and what
// grants it when it is forbidden. err keeps its text and stays in the chain.
func (a apiServer) explain(doing string, err error) error {
	var re *requestError
	hasReq := errors.As(err, &re)
	switch classify(err) {
	case failUnreachable:
		return fmt.Errorf("%s: cannot reach the API server %s (from %s): %w", doing, a.url, a.kubeconfig, err)
	case failTLS:
		return fmt.Errorf("%s: the TLS handshake with the API server %s failed: check that URL and the certificate-authority of %s: %w",
			doing, a.url, a.kubeconfig, err)
	case failUnauthenticated:
		return fmt.Errorf("%s: the API server %s does not accept kip's credentials (401 Unauthorized): kip presented %s, from %s; %s: %w",
			doing, a.url, a.identity.desc, a.kubeconfig, a.identity.hint, err)
	case failForbidden:
		if !hasReq {
			return fmt.Errorf("%s: kip's identity, %s from %s, is forbidden at %s (403 Forbidden): %w", doing, a.identity.desc, a.kubeconfig, a.url, err)
		}
		return fmt.Errorf("%s: kip's identity, %s from %s, may not %s at %s (403 Forbidden); %s: %w",
			doing, a.identity.desc, a.kubeconfig, re.req, a.url, re.req.grant, err)
	}
	if hasReq {
		return fmt.Errorf("%s (%s at %s): %w", doing, re.req, a.url, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// preflight asks the API server its version, so that a server kip cannot
// reach, or that does not accept kip's credentials, is reported before
// anything else starts. /version is open to every identity, anonymous
// included, so any other answer is only logged: the requests kip needs say
// for themselves what they lack.
func (a apiServer) preflight(ctx context.Context, client kubernetes.Interface, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		switch classify(err) {
		case failUnreachable, failTLS, failUnauthenticated:
			return a.explain("checking the API server", err)
		}
		log.Warn("checking the API server", "url", a.url, "kubeconfig", a.kubeconfig, "identity", a.identity.desc, "err", err)
		return nil
	}
	var v version.Info
	_ = json.Unmarshal(raw, &v)
	log.Info("API server", "url", a.url, "version", v.GitVersion, "kubeconfig", a.kubeconfig, "identity", a.identity.desc)
	return nil
}

// loadCA is pki.Load with errors that name the request and what grants it.
func (a apiServer) loadCA(ctx context.Context, client kubernetes.Interface, namespace, name string, opts ...pki.Option) (*pki.CA, error) {
	ca, err := pki.Load(ctx, caClient{client}, namespace, name, opts...)
	if err != nil {
		return nil, a.explain("loading the cluster CA", err)
	}
	return ca, nil
}

// caClient tags the errors of the secret requests pki.Load makes with the
// request, so that a 403 names its verb.
type caClient struct{ kubernetes.Interface }

func (c caClient) CoreV1() corev1client.CoreV1Interface { return caCore{c.Interface.CoreV1()} }

type caCore struct{ corev1client.CoreV1Interface }

func (c caCore) Secrets(namespace string) corev1client.SecretInterface {
	return caSecrets{c.CoreV1Interface.Secrets(namespace), namespace}
}

type caSecrets struct {
	corev1client.SecretInterface
	namespace string
}

func (s caSecrets) request(verb, name string) request {
	return request{
		verb: verb, resource: "secrets", namespace: s.namespace, name: name,
		grant: "apply " + caRBAC + ", which grants this to User system:node:kip for the Secret kip-system/kip-ca " +
			"(edit its User, namespace and resourceNames where kip's differ)",
	}
}

func (s caSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	secret, err := s.SecretInterface.Get(ctx, name, opts)
	return secret, tag(s.request("get", name), err)
}

// Create names no Secret: RBAC cannot restrict create by name.
func (s caSecrets) Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	created, err := s.SecretInterface.Create(ctx, secret, opts)
	return created, tag(s.request("create", ""), err)
}

// checkEndpointSlices lists EndpointSlices once, as the informer of
// host/clusterip will without end, so that a server that forbids them is
// reported at once, naming what grants them. (Services are checked as
// their cache syncs: syncServices.)
func (a apiServer) checkEndpointSlices(ctx context.Context, client kubernetes.Interface) error {
	const doing = "watching the cluster's EndpointSlices for the cells' ClusterIP services"
	req := request{verb: "list", resource: "endpointslices.discovery.k8s.io",
		grant: "apply " + servicesRBAC + ", which grants list and watch of EndpointSlices to User system:node:kip (edit its User where kip's node name differs)"}
	if _, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return a.explain(doing, tag(req, err))
	}
	return nil
}

// syncPods fills the cache of the node's pods from informer (of factory)
// and waits until it is synced (syncCache).
func (a apiServer) syncPods(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory,
	informer cache.SharedIndexInformer, nodeName string, timeout time.Duration,
) error {
	req := request{
		verb: "list", resource: "pods", fieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String(),
		grant: fmt.Sprintf("run kip as the node, system:node:%s in group system:nodes, whom the Node authorizer lets list and watch pods (deploy/rbac grants nothing for pods)", nodeName),
	}
	list := func(ctx context.Context) error {
		_, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: req.fieldSelector, Limit: 1})
		return err
	}
	return a.syncCache(ctx, "syncing the cache of the node's pods", req, list, informer, func() { factory.Start(ctx.Done()) }, timeout)
}

// syncServices starts the informer of the cluster's Services (until ctx
// ends) and waits until it is synced (syncCache): the environment of every
// pod needs them.
func (a apiServer) syncServices(ctx context.Context, client kubernetes.Interface, svcs *serviceenv.Informer, nodeName string, timeout time.Duration) error {
	req := request{
		verb: "list", resource: "services",
		grant: fmt.Sprintf("run kip as the node, system:node:%s in group system:nodes, whom the Node authorizer lets list and watch Services as it does every kubelet (deploy/rbac grants nothing for Services)", nodeName),
	}
	list := func(ctx context.Context) error {
		_, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}
	start := func() { go func() { _ = svcs.Run(ctx) }() }
	return a.syncCache(ctx, "syncing the cache of Services", req, list, svcs.Informer(), start, timeout)
}

// syncCache starts informer (start) and waits until its cache is synced.
// It makes req once itself first (list), so that an API server that is
// unreachable, refuses kip's credentials or forbids the request is
// reported at once, by which of the three it is; the informer retries
// such errors without end. After timeout it reports the informer's last
// error.
func (a apiServer) syncCache(ctx context.Context, doing string, req request, list func(context.Context) error,
	informer cache.SharedIndexInformer, start func(), timeout time.Duration,
) error {
	err := list(ctx)
	if err != nil && classify(err) != failOther {
		return a.explain(doing, tag(req, err))
	}

	var mu sync.Mutex
	last := err
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		mu.Lock()
		last = err
		mu.Unlock()
	}); err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	start()
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", doing, ctx.Err())
	}
	mu.Lock()
	err = last
	mu.Unlock()
	if err == nil {
		return fmt.Errorf("%s: timed out after %s with no error from the API server %s", doing, timeout, a.url)
	}
	return a.explain(fmt.Sprintf("%s: timed out after %s", doing, timeout), tag(req, err))
}
