package podrefs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Token lifetimes, the kubelet's (pkg/kubelet/token): a token is replaced
// once it has lived RefreshFraction of its lifetime or TokenMaxAge,
// whichever comes first.
const (
	// RefreshFraction of a token's lifetime after which it is replaced.
	RefreshFraction = 0.8
	// TokenMaxAge is the age after which a token is replaced whatever its
	// lifetime (tokens the API server extends to a year included).
	TokenMaxAge = 24 * time.Hour
)

// Tokens keeps one pod's service account tokens between resolutions, as
// the kubelet's token manager does: Resolve reuses a token until it needs
// refreshing (RefreshAt), and a refresh that fails keeps the old token
// while it is still valid. Refresh says when the earliest token needs
// refreshing, so that the caller resolves the pod again then and the
// containers get the new token before the old one expires. A token the
// pod no longer asks for is dropped after the next complete Resolve. It
// is safe for concurrent use.
type Tokens struct {
	now func() time.Time

	mu    sync.Mutex
	byKey map[string]*authenticationv1.TokenRequest
	used  map[string]bool // keys asked for by the Resolve under way
}

// NewTokens returns an empty Tokens reading the clock now (nil: time.Now).
func NewTokens(now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{now: now, byKey: map[string]*authenticationv1.TokenRequest{}, used: map[string]bool{}}
}

// RefreshAt is when tr needs replacing: at RefreshFraction of its
// lifetime or TokenMaxAge after it was issued, whichever is first. The
// lifetime is the one the API server granted (Spec.ExpirationSeconds of
// its answer, ending at Status.ExpirationTimestamp); without it the token
// is never refreshed, as on a kubelet.
func RefreshAt(tr *authenticationv1.TokenRequest) time.Time {
	if tr.Spec.ExpirationSeconds == nil {
		return time.Time{}
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	at := issued.Add(time.Duration(float64(ttl) * RefreshFraction))
	if old := issued.Add(TokenMaxAge); old.Before(at) {
		at = old
	}
	return at
}

// Refresh is when the earliest token held needs refreshing; zero when
// none does.
func (t *Tokens) Refresh() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for _, tr := range t.byKey {
		if at := RefreshAt(tr); !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// token returns a token for req from the cache or, when it has none or
// the one it has needs refreshing, from src.
func (t *Tokens) token(ctx context.Context, src Source, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := tokenKey(namespace, serviceAccount, req)
	t.mu.Lock()
	t.used[key] = true
	held := t.byKey[key]
	t.mu.Unlock()
	now := t.now()
	if held != nil {
		if at := RefreshAt(held); at.IsZero() || now.Before(at) {
			return held, nil
		}
	}
	tr, err := src.ServiceAccountToken(ctx, namespace, serviceAccount, req)
	if err == nil && tr.Status.Token == "" {
		err = errors.New("the API returned an empty token")
	}
	if err != nil {
		if held != nil && now.Before(held.Status.ExpirationTimestamp.Time) {
			return held, nil // still valid; the next Resolve tries again
		}
		return nil, err
	}
	t.mu.Lock()
	t.byKey[key] = tr
	t.mu.Unlock()
	return tr, nil
}

// begin starts a Resolve: no token is in use yet.
func (t *Tokens) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.used = map[string]bool{}
}

// prune ends a complete Resolve: the tokens it did not ask for go.
func (t *Tokens) prune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key := range t.byKey {
		if !t.used[key] {
			delete(t.byKey, key)
		}
	}
}

// tokenKey identifies a token request as the kubelet's cache does: the
// service account, the audiences, the requested lifetime and the bound
// object.
func tokenKey(namespace, serviceAccount string, req *authenticationv1.TokenRequest) string {
	var exp int64
	if req.Spec.ExpirationSeconds != nil {
		exp = *req.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if req.Spec.BoundObjectRef != nil {
		ref = *req.Spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%q/%d/%s/%s/%s/%s", namespace, serviceAccount, req.Spec.Audiences, exp, ref.Kind, ref.APIVersion, ref.Name, ref.UID)
}
