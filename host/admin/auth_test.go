package admin

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/test/fakeclock"
)

// fakeAccess knows tokens by their user and grants each user a set of
// "verb path"; err, when set, is what both methods return. It records
// every question.
type fakeAccess struct {
	users  map[string]User            // token → user
	grants map[string]map[string]bool // user → "verb path"
	err    error

	mu    sync.Mutex
	asked []string
}

func (f *fakeAccess) Authenticate(_ context.Context, token string) (User, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "token "+token)
	if f.err != nil {
		return User{}, false, f.err
	}
	u, ok := f.users[token]
	return u, ok, nil
}

func (f *fakeAccess) Authorize(_ context.Context, u User, verb, path string) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "access "+u.Name+" "+verb+" "+path)
	if f.err != nil {
		return false, "", f.err
	}
	return f.grants[u.Name][verb+" "+path], "no RBAC policy matched", nil
}

func (f *fakeAccess) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func request(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// The protected paths answer only a token whose user the Access
// authorizes for the path; the probes answer anyone.
func TestProtectedPaths(t *testing.T) {
	access := func() *fakeAccess {
		return &fakeAccess{
			users: map[string]User{
				"prom-token":  {Name: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}},
				"other-token": {Name: "system:serviceaccount:default:default"},
			},
			grants: map[string]map[string]bool{"system:serviceaccount:monitoring:prometheus": {
				"get /metrics": true, "get /cells": true, "get /debug/pprof/heap": true,
			}},
		}
	}
	tests := []struct {
		name      string
		access    *fakeAccess // nil: SetAccess not called yet
		open      bool        // AllowAnyone
		method    string
		path      string
		token     string
		header    string // the whole Authorization header, instead of token
		wantCode  int
		wantBody  string // a part of it
		wantAsked []string
	}{
		{name: "metrics without a token", access: access(), path: PathMetrics, wantCode: 401, wantBody: "Unauthorized"},
		{name: "cells without a token", access: access(), path: PathCells, wantCode: 401, wantBody: "Unauthorized"},
		{name: "pprof without a token", access: access(), path: PathPprof + "heap", wantCode: 401},
		{name: "basic auth is no token", access: access(), path: PathMetrics, header: "Basic cHJvbTpwcm9t", wantCode: 401},
		{
			name: "a bad token", access: access(), path: PathMetrics, token: "forged", wantCode: 401,
			wantAsked: []string{"token forged"},
		},
		{
			name: "a token without the right", access: access(), path: PathCells, token: "other-token", wantCode: 403,
			wantBody:  "Forbidden (user=system:serviceaccount:default:default, verb=get, path=/cells)",
			wantAsked: []string{"token other-token", "access system:serviceaccount:default:default get /cells"},
		},
		{
			name: "metrics allowed", access: access(), path: PathMetrics, token: "prom-token", wantCode: 200, wantBody: "go_goroutines",
			wantAsked: []string{"token prom-token", "access system:serviceaccount:monitoring:prometheus get /metrics"},
		},
		{
			name: "cells allowed", access: access(), path: PathCells, header: "bearer prom-token", wantCode: 200, wantBody: "[]",
			wantAsked: []string{"token prom-token", "access system:serviceaccount:monitoring:prometheus get /cells"},
		},
		{
			name: "pprof by its own path", access: access(), path: PathPprof + "heap?debug=1", token: "prom-token", wantCode: 200, wantBody: "heap profile",
			wantAsked: []string{"token prom-token", "access system:serviceaccount:monitoring:prometheus get /debug/pprof/heap"},
		},
		{
			name: "the verb follows the method", access: access(), method: http.MethodPost, path: PathMetrics, token: "prom-token", wantCode: 403,
			wantAsked: []string{"token prom-token", "access system:serviceaccount:monitoring:prometheus create /metrics"},
		},
		{
			name: "the path reviewed is the path served", access: access(), path: "/healthz/../cells", token: "other-token", wantCode: 403,
			wantAsked: []string{"token other-token", "access system:serviceaccount:default:default get /cells"},
		},
		{name: "a token before kip has a client", path: PathMetrics, token: "prom-token", wantCode: 503, wantBody: "cannot review tokens yet"},
		{name: "no token before kip has a client", path: PathMetrics, wantCode: 401},
		{
			name: "the API server does not answer", access: &fakeAccess{err: errors.New("connection refused")}, path: PathMetrics, token: "prom-token",
			wantCode: 503, wantAsked: []string{"token prom-token"},
		},
		{name: "healthz is open", access: access(), path: PathHealthz, wantCode: 200, wantBody: "ok"},
		{name: "readyz is open", access: access(), path: PathReadyz + "?verbose", wantCode: 200},
		{name: "a single check is open", access: access(), path: PathHealthz + "/ping", wantCode: 200},
		{name: "authorization none: metrics to anyone", open: true, path: PathMetrics, wantCode: 200, wantBody: "go_goroutines"},
		{name: "authorization none: cells to anyone", open: true, path: PathCells, wantCode: 200, wantBody: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(metrics.New(), slog.New(slog.DiscardHandler))
			s.EnableProfiling()
			if tt.open {
				s.AllowAnyone()
			}
			if tt.access != nil {
				s.SetAccess(tt.access)
			}
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			req, err := http.NewRequestWithContext(t.Context(), cmp.Or(tt.method, http.MethodGet), ts.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.header != "":
				req.Header.Set("Authorization", tt.header)
			case tt.token != "":
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("%s %s = %d %.120q, want %d with %q", req.Method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if tt.access != nil {
				if diff := gocmp.Diff(tt.wantAsked, tt.access.questions()); diff != "" {
					t.Errorf("questions to Access (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// apiServer is a fake clientset that answers TokenReviews from tokens
// (token → user) and SubjectAccessReviews from grants ("user verb path"),
// counting each kind of review; fail makes both fail.
type apiServer struct {
	*fake.Clientset
	mu                      sync.Mutex
	tokenReviews, sarCounts int
	lastSAR                 authorizationv1.SubjectAccessReviewSpec
	fail                    error
}

func newAPIServer(tokens map[string]authenticationv1.UserInfo, grants map[string]bool) *apiServer {
	a := &apiServer{Clientset: fake.NewClientset()}
	a.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.tokenReviews++
		if a.fail != nil {
			return true, nil, a.fail
		}
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		u, ok := tokens[tr.Spec.Token]
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: ok, User: u}
		if !ok {
			tr.Status.Error = "[invalid bearer token, service account token has expired]"
		}
		return true, tr, nil
	})
	a.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.sarCounts++
		if a.fail != nil {
			return true, nil, a.fail
		}
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a.lastSAR = sar.Spec
		nr := sar.Spec.NonResourceAttributes
		if nr != nil && grants[sar.Spec.User+" "+nr.Verb+" "+nr.Path] {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC: allowed by ClusterRoleBinding"}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "", EvaluationError: "clusterrole.rbac.authorization.k8s.io \"gone\" not found"}
		}
		return true, sar, nil
	})
	return a
}

func (a *apiServer) counts() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokenReviews, a.sarCounts
}

const promUser = "system:serviceaccount:monitoring:prometheus"

// ClusterAccess asks the API server by TokenReview and
// SubjectAccessReview, and the server answers 401, 403 or 200 from them.
func TestClusterAccess(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		token    string
		wantCode int
		// wantReviews is how many TokenReviews and SubjectAccessReviews
		// the request cost.
		wantReviews [2]int
	}{
		{name: "no token", path: PathMetrics, wantCode: 401},
		{name: "bad token", path: PathMetrics, token: "forged", wantCode: 401, wantReviews: [2]int{1, 0}},
		{name: "token without rights", path: PathCells, token: "other", wantCode: 403, wantReviews: [2]int{1, 1}},
		{name: "allowed", path: PathMetrics, token: "prom", wantCode: 200, wantReviews: [2]int{1, 1}},
		{name: "allowed cells", path: PathCells, token: "prom", wantCode: 200, wantReviews: [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newAPIServer(map[string]authenticationv1.UserInfo{
				"prom":  {Username: promUser, UID: "u-1", Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
				"other": {Username: "system:serviceaccount:default:default"},
			}, map[string]bool{promUser + " get /metrics": true, promUser + " get /cells": true})
			s := New(metrics.New(), slog.New(slog.DiscardHandler))
			s.SetAccess(ClusterAccess(api))
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			if code, body := request(t, http.MethodGet, ts.URL+tt.path, tt.token); code != tt.wantCode {
				t.Errorf("GET %s = %d %q, want %d", tt.path, code, body, tt.wantCode)
			}
			if tr, sar := api.counts(); [2]int{tr, sar} != tt.wantReviews {
				t.Errorf("reviews = %d TokenReviews, %d SubjectAccessReviews; want %v", tr, sar, tt.wantReviews)
			}
			if tt.wantReviews[1] > 0 {
				want := authorizationv1.SubjectAccessReviewSpec{
					NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: tt.path, Verb: "get"},
				}
				switch tt.token {
				case "prom":
					want.User, want.UID, want.Groups = promUser, "u-1", []string{"system:serviceaccounts", "system:authenticated"}
					want.Extra = map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}
				case "other":
					want.User = "system:serviceaccount:default:default"
				}
				if diff := gocmp.Diff(want, api.lastSAR); diff != "" {
					t.Errorf("SubjectAccessReview (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// Decisions are kept for their TTLs: a scrape every 15 s costs the API
// server nothing until an entry expires; a denial or a bad token is kept
// a shorter time; an API error is not kept.
func TestClusterAccessCaches(t *testing.T) {
	api := newAPIServer(map[string]authenticationv1.UserInfo{
		"prom":  {Username: promUser},
		"other": {Username: "system:serviceaccount:default:default"},
	}, map[string]bool{promUser + " get /metrics": true})
	clk := fakeclock.New(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	s := New(metrics.New(), slog.New(slog.DiscardHandler))
	s.SetAccess(newCachedAccess(reviews{api}, clk.Now))
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	steps := []struct {
		name        string
		advance     time.Duration
		fail        error
		path, token string
		wantCode    int
		wantReviews [2]int // in all, so far
	}{
		{name: "first scrape asks both", path: PathMetrics, token: "prom", wantCode: 200, wantReviews: [2]int{1, 1}},
		{name: "a scrape 15 s later is a cache hit", advance: 15 * time.Second, path: PathMetrics, token: "prom", wantCode: 200, wantReviews: [2]int{1, 1}},
		{name: "another path is another decision", path: PathCells, token: "prom", wantCode: 403, wantReviews: [2]int{1, 2}},
		{name: "the denial is kept", advance: 20 * time.Second, path: PathCells, token: "prom", wantCode: 403, wantReviews: [2]int{1, 2}},
		{name: "the denial expires after 30 s", advance: 11 * time.Second, path: PathCells, token: "prom", wantCode: 403, wantReviews: [2]int{1, 3}},
		{name: "a bad token asks once", path: PathMetrics, token: "forged", wantCode: 401, wantReviews: [2]int{2, 3}},
		{name: "the bad token is kept", advance: 29 * time.Second, path: PathMetrics, token: "forged", wantCode: 401, wantReviews: [2]int{2, 3}},
		{name: "the bad token expires after 30 s", advance: 2 * time.Second, path: PathMetrics, token: "forged", wantCode: 401, wantReviews: [2]int{3, 3}},
		// 15+20+11+29+2 = 77 s since the first scrape: both entries live.
		{name: "the allowed scrape still cached", path: PathMetrics, token: "prom", wantCode: 200, wantReviews: [2]int{3, 3}},
		{name: "past 2 min both are asked again", advance: 44 * time.Second, path: PathMetrics, token: "prom", wantCode: 200, wantReviews: [2]int{4, 4}},
		{name: "an API error is no verdict", path: PathMetrics, token: "other", fail: errors.New("connection refused"), wantCode: 503, wantReviews: [2]int{5, 4}},
		{name: "nor kept", path: PathMetrics, token: "other", wantCode: 403, wantReviews: [2]int{6, 5}},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		api.mu.Lock()
		api.fail = st.fail
		api.mu.Unlock()
		if code, body := request(t, http.MethodGet, ts.URL+st.path, st.token); code != st.wantCode {
			t.Errorf("%s: GET %s = %d %q, want %d", st.name, st.path, code, body, st.wantCode)
		}
		if tr, sar := api.counts(); [2]int{tr, sar} != st.wantReviews {
			t.Errorf("%s: reviews so far = %d, %d; want %v", st.name, tr, sar, st.wantReviews)
		}
	}
}

// Each cache holds at most cacheSize entries, the oldest going first.
func TestClusterAccessCacheIsBounded(t *testing.T) {
	api := newAPIServer(nil, nil)
	c := newCachedAccess(reviews{api}, time.Now)
	for i := range cacheSize + 10 {
		if _, ok, err := c.Authenticate(t.Context(), strings.Repeat("x", i+1)); ok || err != nil {
			t.Fatalf("token %d: %v %v", i, ok, err)
		}
	}
	if n := c.users.Len(); n != cacheSize {
		t.Errorf("%d tokens kept, want at most %d", n, cacheSize)
	}
	// The first token was evicted: asked again.
	before, _ := api.counts()
	if _, _, err := c.Authenticate(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if after, _ := api.counts(); after != before+1 {
		t.Errorf("the oldest token was not evicted: %d reviews, want %d", after, before+1)
	}
}

// Two users who differ only in a group, a UID or an extra are two
// questions.
func TestDecisionKey(t *testing.T) {
	base := User{Name: "u", UID: "1", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"v"}}}
	others := []User{
		{Name: "u", UID: "1", Groups: []string{"a"}, Extra: map[string][]string{"k": {"v"}}},
		{Name: "u", UID: "1", Groups: []string{"a b"}, Extra: map[string][]string{"k": {"v"}}},
		{Name: "u", UID: "2", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"v"}}},
		{Name: "u", UID: "1", Groups: []string{"a", "b"}},
		{Name: "u", UID: "1", Groups: []string{"a", "b"}, Extra: map[string][]string{"k": {"w"}}},
	}
	k := decisionKey(base, "get", "/metrics")
	if k == decisionKey(base, "get", "/cells") || k == decisionKey(base, "create", "/metrics") {
		t.Errorf("the verb or the path is not in the key")
	}
	for _, o := range others {
		if decisionKey(o, "get", "/metrics") == k {
			t.Errorf("%+v and %+v share a key", base, o)
		}
	}
}
