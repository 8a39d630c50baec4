package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLease is wrapped by Run's error when this process lost the Lease
// while it led.
var ErrLostLease = errors.New("lost the leader lease")

// checkTolerance is how long past the Lease's expiry a leader that has not
// renewed it still passes Check (client-go's HealthzAdaptor timeout, as
// kube-controller-manager sets it): a leader whose renewals fail exits
// after renewDeadline, so failing Check means it is stuck.
const checkTolerance = 20 * time.Second

// Elector is one candidate for a virtual node's Lease.
type Elector struct {
	cfg  Config
	lock *resourcelock.LeaseLock
	le   *leaderelection.LeaderElector
	// started receives the leading context once this process leads.
	started chan context.Context
	log     *slog.Logger
}

// New builds the candidate cfg (after ForNode) describes; client holds the
// Lease (an identity CanHold accepts). It requests nothing: Run does.
func New(cfg Config, client kubernetes.Interface, log *slog.Logger) (*Elector, error) {
	if cfg.LeaseName == "" || cfg.Identity == "" {
		return nil, errors.New("creating the leader election: no Lease name or identity (Config.ForNode fills them)")
	}
	e := &Elector{
		cfg: cfg,
		lock: &resourcelock.LeaseLock{
			LeaseMeta:  metaOf(cfg),
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		started: make(chan context.Context, 1),
		log:     log.With("lease", cfg.Namespace+"/"+cfg.LeaseName, "identity", cfg.Identity),
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		Name:          cfg.Namespace + "/" + cfg.LeaseName,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		// Run cancels the election only once lead has returned, so the
		// release never lets a standby in while this process still acts.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { e.started <- ctx },
			OnStoppedLeading: func() {},
			OnNewLeader:      e.newLeader,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the leader election: %w", err)
	}
	e.le = le
	return e, nil
}

func (e *Elector) newLeader(identity string) {
	if identity == e.cfg.Identity {
		e.log.Info("leader election: this process leads")
		return
	}
	e.log.Info("leader election: standing by", "leader", identity)
}

// Run takes part in the election until ctx ends; while this process leads
// it runs lead, whose context ends when the leadership does. See the
// package documentation for what it returns. Call it once.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error) error {
	// The election outlives ctx: it is stopped, and the Lease released,
	// only after lead has returned.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		e.le.Run(electionCtx)
	}()
	e.log.Info("leader election: waiting for the lease", "lease_duration", e.cfg.LeaseDuration, "retry_period", e.cfg.RetryPeriod)
	var leading context.Context
	select {
	case <-ctx.Done():
		stopElection()
		<-ended
		e.log.Info("leader election: stopped while standing by")
		return nil
	case leading = <-e.started:
	}
	e.log.Info("leader election: acquired the lease; starting")

	leadCtx, stopLead := context.WithCancel(ctx)
	defer stopLead()
	// leading ends when the Lease is lost (electionCtx lives on until
	// lead has returned).
	stopWatch := context.AfterFunc(leading, stopLead)
	defer stopWatch()
	result := make(chan error, 1)
	go func() { result <- lead(leadCtx) }()

	select {
	case err := <-result:
		if leading.Err() != nil {
			return e.lost(err)
		}
		stopElection()
		<-ended
		e.log.Info("leader election: released the lease")
		return err
	case <-leading.Done():
	}
	// Lost: lead is stopping. It has until a standby may take the Lease
	// to return; past that, Run returns anyway, for kip to exit.
	grace := e.cfg.LeaseDuration - e.cfg.RenewDeadline
	select {
	case err := <-result:
		return e.lost(err)
	case <-time.After(grace):
		e.log.Error("leader election: lost the lease and the leader's work did not stop in time", "waited", grace)
		return e.lost(nil)
	}
}

// lost is the error of a Run whose lease was lost; err is lead's.
func (e *Elector) lost(err error) error {
	lost := fmt.Errorf("%w %s/%s (identity %s; the leader is now %q): the Lease was not renewed within renewDeadline %s, or another holder took it; exiting, to start again as a standby",
		ErrLostLease, e.cfg.Namespace, e.cfg.LeaseName, e.cfg.Identity, e.Leader(), e.cfg.RenewDeadline)
	if err != nil && !errors.Is(err, context.Canceled) {
		return errors.Join(lost, err)
	}
	return lost
}

// IsLeader reports whether this process holds the Lease, as it last saw
// it.
func (e *Elector) IsLeader() bool { return e.le.IsLeader() }

// Leader is the Lease's holder as this process last saw it ("" before it
// read the Lease).
func (e *Elector) Leader() string { return e.le.GetLeader() }

// Check fails only when this process leads and has not renewed the Lease
// for leaseDuration plus 20 s (client-go's HealthzAdaptor): a standby
// passes, so that a two-replica Deployment's rollout ends. It is an
// admin health and readiness check.
func (e *Elector) Check(*http.Request) error {
	if err := e.le.Check(checkTolerance); err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	return nil
}

func metaOf(cfg Config) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.LeaseName}
}
