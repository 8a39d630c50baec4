package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"
)

// User is whom a bearer token belongs to, as the API server's TokenReview
// names them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Access decides who may read the admin server's protected paths
// (/metrics, /cells, /debug/pprof/): the cluster's own answer, as the
// kubelet's and kube-rbac-proxy's /metrics take it.
type Access interface {
	// Authenticate says whose token is: its user and true; false (and no
	// error) when the token is not valid (unknown, expired, revoked, of
	// another audience); an error only when it could not tell (the API
	// server did not answer).
	Authenticate(ctx context.Context, token string) (User, bool, error)
	// Authorize says whether u may do verb (get, create, …) on the
	// non-resource path (/metrics): true or false with the reason the
	// authorizer gave, or an error when it could not tell.
	Authorize(ctx context.Context, u User, verb, path string) (allowed bool, reason string, err error)
}

// Cache lifetimes of ClusterAccess's decisions, as the kubelet's webhook
// authenticator and authorizer keep theirs: a Prometheus that scrapes
// every 15 s costs the API server two reviews every 2 minutes, not two a
// scrape; a denial or an unknown token is asked again after 30 s. A token
// or a binding revoked is still honoured for at most its entry's lifetime.
const (
	// AuthenticatedTTL is how long a valid token's user is kept.
	AuthenticatedTTL = 2 * time.Minute
	// UnauthenticatedTTL is how long a token found not valid is kept.
	UnauthenticatedTTL = 30 * time.Second
	// AllowedTTL is how long an allowed decision is kept.
	AllowedTTL = 2 * time.Minute
	// DeniedTTL is how long a denied decision is kept.
	DeniedTTL = 30 * time.Second
	// cacheSize bounds each cache (tokens, decisions): the oldest entry
	// goes first.
	cacheSize = 1024
)

// ClusterAccess is the Access of the cluster client talks to: a
// TokenReview (authentication.k8s.io/v1) for each token and a
// SubjectAccessReview (authorization.k8s.io/v1) on the non-resource URL
// for each user, path and verb, each answer kept for its TTL above
// (errors are not kept). client's identity must be allowed to create
// both: a node's is (the Node authorizer grants it, as to a kubelet in
// webhook mode); another's needs system:auth-delegator. Give it a client
// of its own, with its own rate limiter: tokens nobody knows are each one
// request, and must not take the share of the client that writes pod
// status.
func ClusterAccess(client kubernetes.Interface) Access {
	return newCachedAccess(reviews{client}, time.Now)
}

// reviews is Access by TokenReview and SubjectAccessReview, uncached.
type reviews struct{ client kubernetes.Interface }

func (r reviews) Authenticate(ctx context.Context, token string) (User, bool, error) {
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("reviewing a token: %w", err)
	}
	if !tr.Status.Authenticated {
		// Status.Error says why (an expired token, say): still a token
		// that is not valid, as the kubelet's webhook mode takes it.
		return User{}, false, nil
	}
	u := tr.Status.User
	var extra map[string][]string
	if len(u.Extra) > 0 {
		extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	return User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

func (r reviews) Authorize(ctx context.Context, u User, verb, path string) (bool, string, error) {
	var extra map[string]authorizationv1.ExtraValue
	if len(u.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("reviewing %s's access to %s %s: %w", u.Name, verb, path, err)
	}
	// Not allowed is denied, whatever Status.EvaluationError says (RBAC
	// reports a binding to a missing role there beside its decision).
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// cachedAccess keeps next's answers (not its errors) for their TTLs, in
// two bounded caches: users by the token's SHA-256 (never the token
// itself) and decisions by user, verb and path.
type cachedAccess struct {
	next      Access
	now       func() time.Time
	users     *lru.Cache
	decisions *lru.Cache
}

type userEntry struct {
	user    User
	ok      bool
	expires time.Time
}

type decisionEntry struct {
	allowed bool
	reason  string
	expires time.Time
}

func newCachedAccess(next Access, now func() time.Time) *cachedAccess {
	return &cachedAccess{next: next, now: now, users: lru.New(cacheSize), decisions: lru.New(cacheSize)}
}

func (c *cachedAccess) Authenticate(ctx context.Context, token string) (User, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := c.users.Get(key); ok {
		if e, _ := v.(userEntry); c.now().Before(e.expires) {
			return e.user, e.ok, nil
		}
		c.users.Remove(key)
	}
	u, ok, err := c.next.Authenticate(ctx, token)
	if err != nil {
		return User{}, false, err
	}
	ttl := UnauthenticatedTTL
	if ok {
		ttl = AuthenticatedTTL
	}
	c.users.Add(key, userEntry{user: u, ok: ok, expires: c.now().Add(ttl)})
	return u, ok, nil
}

func (c *cachedAccess) Authorize(ctx context.Context, u User, verb, path string) (bool, string, error) {
	key := decisionKey(u, verb, path)
	if v, ok := c.decisions.Get(key); ok {
		if e, _ := v.(decisionEntry); c.now().Before(e.expires) {
			return e.allowed, e.reason, nil
		}
		c.decisions.Remove(key)
	}
	allowed, reason, err := c.next.Authorize(ctx, u, verb, path)
	if err != nil {
		return false, "", err
	}
	ttl := DeniedTTL
	if allowed {
		ttl = AllowedTTL
	}
	c.decisions.Add(key, decisionEntry{allowed: allowed, reason: reason, expires: c.now().Add(ttl)})
	return allowed, reason, nil
}

// decisionKey is everything a SubjectAccessReview asks, each part
// quoted so that no two questions share a key.
func decisionKey(u User, verb, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %q", verb, path, u.Name, u.UID, u.Groups)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%q", k, u.Extra[k])
	}
	return b.String()
}

// verbOf is the authorization verb of an HTTP method, as the kubelet
// names it for its own paths.
func verbOf(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// bearerToken is the request's bearer token, "" without one.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
