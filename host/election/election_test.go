package election

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var quiet = slog.New(slog.DiscardHandler)

// fast is a configuration whose elections end in a few seconds; the Lease
// counts whole seconds, so leaseDuration is at least one.
func fast(identity string) Config {
	c := DefaultConfig()
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 100*time.Millisecond
	c.LeaseName, c.Identity = "kip-test", identity
	return c
}

func newElector(t *testing.T, cfg Config, client *fake.Clientset) *Elector {
	t.Helper()
	e, err := New(cfg, client, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func lease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases(DefaultNamespace).Get(t.Context(), "kip-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitFor polls cond for up to a minute (a bound, not a measure).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type runResult struct{ err error }

// run runs e in the background with a lead that records its start and
// blocks until its context ends.
func run(ctx context.Context, e *Elector, leading *atomic.Bool, leadErr error) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		err := e.Run(ctx, func(ctx context.Context) error {
			leading.Store(true)
			<-ctx.Done()
			leading.Store(false)
			return leadErr
		})
		done <- runResult{err}
	}()
	return done
}

// One of two candidates leads; the other runs nothing. When the leader's
// context ends (SIGTERM), its work stops, then it releases the Lease, and
// the standby leads.
func TestStandbyTakesOverOnRelease(t *testing.T) {
	client := fake.NewClientset()
	a, b := newElector(t, fast("a"), client), newElector(t, fast("b"), client)
	ctxA, stopA := context.WithCancel(t.Context())
	var leadingA, leadingB atomic.Bool
	doneA := run(ctxA, a, &leadingA, nil)
	waitFor(t, "a to lead", leadingA.Load)
	doneB := run(t.Context(), b, &leadingB, nil)
	waitFor(t, "b to see a lead", func() bool { return b.Leader() == "a" })
	if leadingB.Load() || b.IsLeader() || !a.IsLeader() {
		t.Fatalf("b leads %v (IsLeader %v), a IsLeader %v: want a alone", leadingB.Load(), b.IsLeader(), a.IsLeader())
	}
	if err := b.Check(nil); err != nil {
		t.Errorf("the standby's Check: %v, want nil", err)
	}
	if err := a.Check(nil); err != nil {
		t.Errorf("the leader's Check: %v, want nil", err)
	}

	stopA()
	if r := <-doneA; r.err != nil {
		t.Fatalf("a's Run after its context ended: %v, want nil", r.err)
	}
	if leadingA.Load() {
		t.Error("a's work still runs after Run returned")
	}
	waitFor(t, "b to lead", leadingB.Load)
	if l := lease(t, client); *l.Spec.HolderIdentity != "b" {
		t.Errorf("holder %q, want b", *l.Spec.HolderIdentity)
	}
	select {
	case r := <-doneB:
		t.Fatalf("b's Run returned while leading: %v", r.err)
	default:
	}
}

// The release that ends a leader's Run leaves the Lease free at once: a
// one-second term and no holder, which a standby takes at its next try.
func TestReleaseOnCancel(t *testing.T) {
	client := fake.NewClientset()
	a := newElector(t, fast("a"), client)
	ctx, stop := context.WithCancel(t.Context())
	var leading atomic.Bool
	done := run(ctx, a, &leading, nil)
	waitFor(t, "a to lead", leading.Load)
	stop()
	<-done
	l := lease(t, client)
	if holder := l.Spec.HolderIdentity; (holder != nil && *holder != "") || *l.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("after the release: holder %v, duration %d s; want none, 1 s", l.Spec.HolderIdentity, *l.Spec.LeaseDurationSeconds)
	}
}

// A standby whose context ends returns nil without ever running lead.
func TestStandbyStops(t *testing.T) {
	client := fake.NewClientset()
	a, b := newElector(t, fast("a"), client), newElector(t, fast("b"), client)
	var leadingA, leadingB atomic.Bool
	run(t.Context(), a, &leadingA, nil)
	waitFor(t, "a to lead", leadingA.Load)
	ctxB, stopB := context.WithCancel(t.Context())
	doneB := run(ctxB, b, &leadingB, nil)
	waitFor(t, "b to see a lead", func() bool { return b.Leader() == "a" })
	stopB()
	if r := <-doneB; r.err != nil {
		t.Errorf("a standby's Run after its context ended: %v, want nil", r.err)
	}
	if leadingB.Load() {
		t.Error("the standby ran lead")
	}
	if l := lease(t, client); *l.Spec.HolderIdentity != "a" {
		t.Errorf("holder %q after the standby stopped, want a", *l.Spec.HolderIdentity)
	}
}

// A leader that cannot renew the Lease for renewDeadline stops its work
// and Run says it lost the Lease.
func TestLostLeaseEndsRun(t *testing.T) {
	client := fake.NewClientset()
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is away")
		}
		return false, nil, nil
	})
	a := newElector(t, fast("a"), client)
	var leading atomic.Bool
	done := run(t.Context(), a, &leading, context.Canceled)
	waitFor(t, "a to lead", leading.Load)
	failing.Store(true)
	r := <-done
	if !errors.Is(r.err, ErrLostLease) {
		t.Fatalf("Run: %v, want ErrLostLease", r.err)
	}
	for _, want := range []string{"kip-system/kip-test", "identity a", "exiting"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("Run's error %q lacks %q", r.err, want)
		}
	}
	if leading.Load() {
		t.Error("the work still runs after the lease was lost")
	}
}

// lead's own error ends Run, after the release.
func TestLeadErrorReleases(t *testing.T) {
	client := fake.NewClientset()
	a := newElector(t, fast("a"), client)
	boom := errors.New("plugin failed")
	err := a.Run(t.Context(), func(context.Context) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, ErrLostLease) {
		t.Fatalf("Run: %v, want the plugin's error alone", err)
	}
	if l := lease(t, client); *l.Spec.LeaseDurationSeconds != 1 {
		t.Errorf("Lease duration %d s, want 1 (released)", *l.Spec.LeaseDurationSeconds)
	}
}

func TestNewNeedsForNode(t *testing.T) {
	if _, err := New(DefaultConfig(), fake.NewClientset(), quiet); err == nil {
		t.Error("New without a Lease name or identity: nil error")
	}
}

// whoami answers SelfSubjectReviews as user in groups, and access reviews
// by verb from allowed.
func whoami(client *fake.Clientset, user string, groups []string, allowed map[string]bool) {
	client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups},
		}}, nil
	})
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attrs := review.Spec.ResourceAttributes
		out := review.DeepCopy()
		out.Status.Allowed = allowed[attrs.Verb] && attrs.Namespace == DefaultNamespace &&
			attrs.Group == "coordination.k8s.io" && attrs.Resource == "leases" &&
			(attrs.Name == "kip-test" || attrs.Verb == "create" && attrs.Name == "")
		return true, out, nil
	})
}

func TestCanHold(t *testing.T) {
	sa := "system:serviceaccount:kip-system:kip"
	all := map[string]bool{"get": true, "create": true, "update": true}
	tests := []struct {
		name    string
		user    string
		groups  []string
		allowed map[string]bool
		review  error // the SelfSubjectReview's error
		want    []string
	}{
		{name: "service account granted", user: sa, groups: []string{"system:serviceaccounts"}, allowed: all},
		{name: "node identity", user: "system:node:kip", groups: []string{"system:nodes", "system:authenticated"}, allowed: all,
			want: []string{`"system:node:kip"`, "cannot hold the Lease kip-system/kip-test", "NodeRestriction", "leaderElection.kubeconfig", RBACFile}},
		{name: "not granted", user: sa, allowed: map[string]bool{"get": true},
			want: []string{`"` + sa + `" may not create, update the Lease kip-system/kip-test`, RBACFile, "kip-system/kip"}},
		{name: "server without SelfSubjectReview", review: apierrors.NewNotFound(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, ""),
			allowed: map[string]bool{"get": true, "create": true},
			want:    []string{"the identity kip uses for the election may not update"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			whoami(client, tt.user, tt.groups, tt.allowed)
			if tt.review != nil {
				client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.review
				})
			}
			err := CanHold(t.Context(), client, fast("a"))
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("CanHold: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CanHold: nil error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("CanHold's error %q lacks %q", err, want)
				}
			}
		})
	}
}

// An API server that fails the review request is an error of the request.
func TestCanHoldRequestError(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
	})
	err := CanHold(t.Context(), client, fast("a"))
	if err == nil || !strings.Contains(err.Error(), "asking the API server who kip is") {
		t.Errorf("CanHold: %v, want the request's error", err)
	}
}
