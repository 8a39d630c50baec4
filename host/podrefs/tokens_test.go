package podrefs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// issuer is a Source whose tokens are numbered and live as long as asked
// (or grant, when set), from the test's clock; err makes requests fail.
type issuer struct {
	*fakeSource
	now   func() time.Time
	grant int64
	err   error
	n     int
}

func (s *issuer) ServiceAccountToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.n++
	out := req.DeepCopy()
	if s.grant != 0 {
		out.Spec.ExpirationSeconds = ptr.To(s.grant)
	}
	out.Status.Token = fmt.Sprintf("%s/%s#%d", ns, sa, s.n)
	out.Status.ExpirationTimestamp = metav1.NewTime(s.now().Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestRefreshAt(t *testing.T) {
	token := func(ttl int64) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{
			Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(ttl)},
			Status: authenticationv1.TokenRequestStatus{ExpirationTimestamp: metav1.NewTime(t0.Add(time.Duration(ttl) * time.Second))},
		}
	}
	for _, tc := range []struct {
		name string
		tr   *authenticationv1.TokenRequest
		want time.Time
	}{
		{"an hour: at 48 minutes", token(3600), t0.Add(48 * time.Minute)},
		{"the API's minimum, 10 minutes: at 8", token(600), t0.Add(8 * time.Minute)},
		{"two days: at 24 hours, not 38.4", token(2 * 86400), t0.Add(24 * time.Hour)},
		{"30 hours: at 24, the earlier", token(30 * 3600), t0.Add(24 * time.Hour)},
		{"no lifetime: never", &authenticationv1.TokenRequest{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefreshAt(tc.tr); !got.Equal(tc.want) {
				t.Errorf("RefreshAt = %s, want %s", got, tc.want)
			}
		})
	}
}

// tokenPod has a kube-api-access volume (one hour) and a vault token
// (audience vault, two hours).
func tokenPod() *corev1.Pod {
	pod := basePod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
		}}}},
		{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr.To[int64](7200)}},
		}}}},
	}
	return pod
}

// resolveTokens resolves pod and returns its token files by volume.
func resolveTokens(t *testing.T, src Source, pod *corev1.Pod, tokens *Tokens) map[string]string {
	t.Helper()
	req, err := Resolve(t.Context(), src, Cluster{}, pod, cell, tokens)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for vol, files := range req.Volumes {
		out[vol] = string(files.Files["token"])
	}
	return out
}

// A pod's tokens are reused until they need refreshing, each on its own
// schedule, and Refresh says when the next one does.
func TestTokensAreReusedUntilTheyNeedRefreshing(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	src := &issuer{fakeSource: newSource(), now: clk.Now}
	tokens := NewTokens(clk.Now)
	pod := tokenPod()

	steps := []struct {
		at          time.Duration
		want        map[string]string
		wantRefresh time.Duration
	}{
		{0, map[string]string{"kube-api-access": "ns/runner#1", "vault": "ns/runner#2"}, 48 * time.Minute},
		{47 * time.Minute, map[string]string{"kube-api-access": "ns/runner#1", "vault": "ns/runner#2"}, 48 * time.Minute},
		{48 * time.Minute, map[string]string{"kube-api-access": "ns/runner#3", "vault": "ns/runner#2"}, 96 * time.Minute},
		{96 * time.Minute, map[string]string{"kube-api-access": "ns/runner#4", "vault": "ns/runner#5"}, 144 * time.Minute},
	}
	for _, s := range steps {
		clk.SetTime(t0.Add(s.at))
		if diff := cmp.Diff(s.want, resolveTokens(t, src, pod, tokens)); diff != "" {
			t.Errorf("at +%s, tokens (-want +got):\n%s", s.at, diff)
		}
		if got, want := tokens.Refresh(), t0.Add(s.wantRefresh); !got.Equal(want) {
			t.Errorf("at +%s, Refresh = +%s, want +%s", s.at, got.Sub(t0), s.wantRefresh)
		}
	}
	// The vault token asked for audience vault and two hours.
	held := tokens.byKey[tokenKey("ns", "runner", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"vault"}, ExpirationSeconds: ptr.To[int64](7200),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "uid-1"},
	}})]
	if held == nil || held.Status.Token != "ns/runner#5" {
		t.Errorf("vault token held under its audience and lifetime: %+v", held)
	}
}

// A token the API server extends (kube-api-access asks for 3607 s and
// gets a year) is still replaced after 24 hours.
func TestExtendedTokensAreRefreshedDaily(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	src := &issuer{fakeSource: newSource(), now: clk.Now, grant: 365 * 86400}
	tokens := NewTokens(clk.Now)
	resolveTokens(t, src, tokenPod(), tokens)
	if got, want := tokens.Refresh(), t0.Add(24*time.Hour); !got.Equal(want) {
		t.Errorf("Refresh = %s, want %s", got, want)
	}
}

// A refresh that fails keeps the old token while it is valid; once it has
// expired, the failure is the pod's.
func TestFailedRefreshKeepsAValidToken(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	src := &issuer{fakeSource: newSource(), now: clk.Now}
	tokens := NewTokens(clk.Now)
	pod := tokenPod()
	pod.Spec.Volumes = pod.Spec.Volumes[:1]
	resolveTokens(t, src, pod, tokens)

	src.err = errors.New("API server unreachable")
	clk.SetTime(t0.Add(50 * time.Minute))
	if got := resolveTokens(t, src, pod, tokens)["kube-api-access"]; got != "ns/runner#1" {
		t.Errorf("after a failed refresh, token = %q, want the old one", got)
	}
	clk.SetTime(t0.Add(time.Hour + time.Second))
	if _, err := Resolve(t.Context(), src, Cluster{}, pod, cell, tokens); !errors.Is(err, src.err) {
		t.Errorf("refresh failing after expiry: %v, want the API's error", err)
	}
	src.err = nil
	if got := resolveTokens(t, src, pod, tokens)["kube-api-access"]; got != "ns/runner#2" {
		t.Errorf("after the API came back, token = %q, want a new one", got)
	}
}

// Tokens the pod no longer asks for are dropped by the next Resolve, and
// no longer set the refresh time.
func TestTokensNoLongerAskedForAreDropped(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	src := &issuer{fakeSource: newSource(), now: clk.Now}
	tokens := NewTokens(clk.Now)
	pod := tokenPod()
	resolveTokens(t, src, pod, tokens)
	pod.Spec.Volumes = pod.Spec.Volumes[1:]
	resolveTokens(t, src, pod, tokens)
	if got, want := tokens.Refresh(), t0.Add(96*time.Minute); !got.Equal(want) {
		t.Errorf("Refresh = +%s, want the vault token's +96m", got.Sub(t0))
	}
	pod.Spec.Volumes = nil
	resolveTokens(t, src, pod, tokens)
	if got := tokens.Refresh(); !got.IsZero() {
		t.Errorf("Refresh = %s with no token, want zero", got)
	}
}
