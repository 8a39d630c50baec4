package cells

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
)

// TagWarmPool is the tag of a standby cell's instance: its pool's name
// (pluginapi.TagWarmPool). It stays on the instance once a pod was given
// the cell (a plugin cannot change tags); the agent says which pod it runs
// (cellclient.Agent.PodUID).
const TagWarmPool = pluginapi.TagWarmPool

// ReasonAssignedWarmCell is the Normal event of a pod given a standby
// cell of the warm pool instead of a launch of its own.
const ReasonAssignedWarmCell = "AssignedWarmCell"

// warmCellPrefix starts the ID of every standby cell: "kip-warm-" and 16
// hex digits, derived from no pod ("w" is in no UID's hexadecimal, so
// cellOf tells it from a pod's cell ID).
const warmCellPrefix = cellIDPrefix + "warm-"

// newWarmCellID is a fresh standby cell ID.
func newWarmCellID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return warmCellPrefix + hex.EncodeToString(b[:])
}

// isWarmCellID reports whether id names a standby cell (given to a pod or
// not).
func isWarmCellID(id string) bool { return strings.HasPrefix(id, warmCellPrefix) }

// standby is one standby cell of a pool: launched (inst set once Launch
// answered), then ready once its agent joined.
type standby struct {
	pool    string
	cellID  string
	offer   match.Candidate // the offering it was launched on
	created time.Time       // its launch (or its instance's, when adopted)
	inst    *pluginapi.Instance
	ready   bool
	// booted wakes ready's wait when the plugin's events say the
	// instance runs (warmPool.event), as a pod's cell is woken.
	booted chan struct{}
}

// warmPool keeps each configured pool's count of standby cells booted
// (booting and ready, never more), hands the cheapest fitting ready one to
// a pod (take), replaces those taken, aged or lost, and backs off a pool
// whose launches fail. It runs where the Manager runs (Run), so only on
// the leader.
type warmPool struct {
	d          *cellDeps
	maxPremium float64
	interval   time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	pools    []*poolState
	standbys map[string]*standby // by cell ID
	wake     chan struct{}
	busy     sync.WaitGroup // the standbys' boot goroutines and terminations
}

// poolState is one pool's configuration and how its launches fare.
type poolState struct {
	cfg WarmPool
	// refused says why the pool is not launched (its price ceiling), once
	// said in the log.
	refused string
	// retryAt is when the pool is launched again after a failure;
	// failures counts failures in a row.
	retryAt  time.Time
	failures int
}

// newWarmPool is the warm pool of cfg; nil when no pool is configured.
func newWarmPool(d *cellDeps, cfg Config) *warmPool {
	if len(cfg.WarmPool.Pools) == 0 {
		return nil
	}
	w := &warmPool{d: d, maxPremium: cfg.WarmPool.MaxPremium, interval: cfg.WarmInterval, log: d.log.With("component", "warm-pool"),
		standbys: map[string]*standby{}, wake: make(chan struct{}, 1)}
	for _, p := range cfg.WarmPool.Pools {
		w.pools = append(w.pools, &poolState{cfg: p})
	}
	return w
}

// run looks after the pools every interval and whenever a standby is
// taken or ends, until ctx ends; it returns once the booting standbys'
// goroutines have (the standbys themselves survive, for the next run to
// adopt).
func (w *warmPool) run(ctx context.Context) {
	if w == nil {
		return
	}
	defer w.busy.Wait()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		w.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// poke makes run look after the pools now.
func (w *warmPool) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// tick replaces the ready standbys past their pool's maxAge and launches
// what each pool lacks.
func (w *warmPool) tick(ctx context.Context) {
	now := w.d.now()
	var aged []*standby
	w.mu.Lock()
	for id, sb := range w.standbys {
		if p := w.poolLocked(sb.pool); sb.ready && p != nil && now.Sub(sb.created) >= p.cfg.MaxAge {
			delete(w.standbys, id)
			aged = append(aged, sb)
		}
	}
	w.mu.Unlock()
	for _, sb := range aged {
		w.log.Info("standby cell reached its pool's maxAge; replacing it", "pool", sb.pool, "cell", sb.cellID, "instance", sb.inst.ID)
		w.end(ctx, sb, metrics.WarmEndAged)
	}
	for _, p := range w.pools {
		w.fill(ctx, p, now)
	}
	w.report()
}

// fill launches the standbys pool p lacks, unless it is refused or
// backing off.
func (w *warmPool) fill(ctx context.Context, p *poolState, now time.Time) {
	w.mu.Lock()
	if now.Before(p.retryAt) {
		w.mu.Unlock()
		return
	}
	missing := p.cfg.Count - w.countLocked(p.cfg.Name)
	w.mu.Unlock()
	if missing <= 0 {
		return
	}
	offer, err := w.resolve(ctx, p)
	if err != nil {
		return // said by resolve
	}
	for range missing {
		sb := &standby{pool: p.cfg.Name, cellID: newWarmCellID(), offer: offer, created: now, booted: make(chan struct{}, 1)}
		w.mu.Lock()
		if w.countLocked(p.cfg.Name) >= p.cfg.Count {
			w.mu.Unlock()
			return
		}
		w.standbys[sb.cellID] = sb
		w.mu.Unlock()
		w.busy.Go(func() { w.boot(ctx, p, sb) })
	}
}

// resolve is the offering pool p launches now: its instance type, or the
// cheapest type its size fits (as a pod of that size would be matched),
// in its zone (or the cheapest offering's) and capacity type, skipping
// offerings out of capacity. A pool dearer than its maxPricePerHour, or
// of unknown price under one, is refused: an error in the log, once, and
// never launched.
func (w *warmPool) resolve(ctx context.Context, p *poolState) (match.Candidate, error) {
	cat, err := w.d.placement.catalog.get(ctx)
	if err != nil {
		w.log.Warn("reading the catalog for the warm pool", "pool", p.cfg.Name, "error", err)
		return match.Candidate{}, err
	}
	req, err := poolRequirements(p.cfg, w.d.cfg.Match)
	if err == nil {
		var cands []match.Candidate
		cands, err = cat.Rank(req, w.d.placement.isUnavailable, w.d.cfg.Match)
		if err == nil {
			cand := cands[0]
			if c := p.cfg.MaxPricePerHour; c > 0 && (!cand.PriceKnown || cand.HourlyPrice > c) {
				err = fmt.Errorf("warm pool %s: its offering %s in %s (%s, %s) is above its maxPricePerHour $%g; no standby is launched",
					p.cfg.Name, cand.InstanceType, cand.Zone, cand.CapacityType, priceText(cand), c)
				w.refuse(p, err)
				return match.Candidate{}, err
			}
			w.mu.Lock()
			p.refused = ""
			w.mu.Unlock()
			return cand, nil
		}
	}
	if match.IsUnsatisfiable(err) {
		err = fmt.Errorf("warm pool %s: no offering fits it now: %w", p.cfg.Name, err)
	}
	w.refuse(p, err)
	return match.Candidate{}, err
}

// refuse says once, per distinct reason, why pool p launches nothing.
func (w *warmPool) refuse(p *poolState, err error) {
	w.mu.Lock()
	repeat := p.refused == err.Error()
	p.refused = err.Error()
	w.mu.Unlock()
	if !repeat {
		w.log.Error("warm pool launches nothing", "pool", p.cfg.Name, "error", err)
	}
}

// poolRequirements are the requirements a pool's standby is matched on:
// a pod of the pool's size, or asking for its instance type, in its zone
// and capacity type.
func poolRequirements(p WarmPool, cfg match.Config) (match.Requirements, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "warm-pool-" + p.Name, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "standby"}}},
	}
	if p.InstanceType != "" {
		pod.Annotations[match.AnnotationInstanceType] = p.InstanceType
	} else {
		cpu, err := resource.ParseQuantity(p.Size.CPU)
		if err != nil {
			return match.Requirements{}, fmt.Errorf("warm pool %s: size.cpu: %w", p.Name, err)
		}
		mem, err := resource.ParseQuantity(p.Size.Memory)
		if err != nil {
			return match.Requirements{}, fmt.Errorf("warm pool %s: size.memory: %w", p.Name, err)
		}
		pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
	}
	req, err := match.PodRequirements(pod, cfg)
	if err != nil {
		return req, err
	}
	source := "warm pool " + p.Name
	if p.Zone != "" {
		req.Zones, req.ZoneSource = []string{p.Zone}, source
	}
	req.CapacityTypes, req.CapacityTypeSource = []pluginapi.CapacityType{p.CapacityType}, source
	return req, nil
}

// boot launches standby sb of pool p, waits until its instance runs and
// joins its agent: then it is ready. A failure drops it (terminating its
// instance) and backs the pool off: an offering out of capacity or quota
// is skipped for Config.UnavailableTTL (the next resolve picks another, or
// none), anything else waits RefusedRetry, doubling.
func (w *warmPool) boot(ctx context.Context, p *poolState, sb *standby) {
	inst, err := w.launch(ctx, sb)
	if err == nil {
		w.d.metrics.WarmLaunched(sb.pool)
		w.d.metrics.InstanceUp(inst.ID, placementOf(placedAnnotations(sb.offer, inst.Zone)), w.d.now())
		w.mu.Lock()
		sb.inst = inst
		w.mu.Unlock()
		w.report()
		err = w.ready(ctx, sb)
	}
	if err == nil {
		w.mu.Lock()
		p.failures, p.retryAt = 0, time.Time{}
		w.mu.Unlock()
		w.log.Info("standby cell ready", "pool", sb.pool, "cell", sb.cellID, "instance", sb.inst.ID, "type", sb.inst.InstanceType, "zone", sb.inst.Zone)
		w.report()
		return
	}
	if ctx.Err() != nil {
		// Run ended: the standby stays for the next run to adopt.
		return
	}
	w.mu.Lock()
	delete(w.standbys, sb.cellID)
	if !offeringUnavailable(err) {
		p.retryAt = w.d.now().Add(refusalWait(w.d.cfg.RefusedRetry, p.failures))
		p.failures++
	}
	w.mu.Unlock()
	w.log.Warn("standby cell failed", "pool", sb.pool, "cell", sb.cellID, "error", err)
	if inst != nil {
		w.d.terminator.terminate(ctx, inst.ID, sb.cellID)
		w.d.metrics.WarmTerminated(sb.pool, metrics.WarmEndBootFail)
	}
	w.report()
	w.poke()
}

// launch launches sb's instance (launchInstance, a pod's cell's launch
// step): what is transient is retried, and capacity and quota answers
// mark the offering as a pod's launch does.
func (w *warmPool) launch(ctx context.Context, sb *standby) (*pluginapi.Instance, error) {
	boot, err := w.d.identity.Bootstrap(sb.cellID, w.d.cfg.ClusterID, w.d.cfg.NodeName, "", w.d.cfg.JoinTokenTTL)
	if err != nil {
		return nil, fmt.Errorf("issuing the standby's bootstrap: %w", err)
	}
	data, err := boot.Marshal()
	if err != nil {
		return nil, fmt.Errorf("issuing the standby's bootstrap: %w", err)
	}
	req := &pluginapi.LaunchRequest{
		CellID: sb.cellID, NodeName: w.d.cfg.NodeName, InstanceType: sb.offer.InstanceType, CapacityType: sb.offer.CapacityType,
		Image: w.d.cfg.Image, Bootstrap: data, Tags: map[string]string{TagWarmPool: sb.pool},
	}
	if sb.offer.Zone != "" {
		req.Zones = []string{sb.offer.Zone}
	}
	log := w.standbyLog(sb)
	log.Info("launching standby cell", "type", sb.offer.InstanceType, "zone", sb.offer.Zone,
		"capacity_type", sb.offer.CapacityType, "price", priceText(sb.offer))
	inst, _, err := w.d.launchInstance(ctx, log, req, sb.offer, nil)
	switch {
	case err == nil:
		return inst, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		return nil, fmt.Errorf("launching the standby cell: %w", err)
	}
}

// ready waits until sb's instance runs with an address (awaitRunning, a
// pod's cell's boot-wait step, within Config.BootTimeout) and joins its
// agent (joinUntil and joinAttempt, a pod's cell's join step, within
// Config.AgentTimeout from then), then marks it ready.
func (w *warmPool) ready(ctx context.Context, sb *standby) error {
	w.mu.Lock()
	inst := sb.inst
	w.mu.Unlock()
	log := w.standbyLog(sb)
	inst, err := w.d.awaitRunning(ctx, log, sb.cellID, inst, sb.booted, func(got *pluginapi.Instance) {
		w.mu.Lock()
		sb.inst = got
		w.mu.Unlock()
	})
	if err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, w.d.cfg.AgentTimeout)
	defer cancel()
	var last error
	if !w.d.joinUntil(jctx, func(ctx context.Context) error {
		_, last = w.d.joinAttempt(ctx, sb.cellID, inst)
		return last
	}) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if last == nil {
			last = jctx.Err()
		}
		return fmt.Errorf("the agent of standby cell %s did not join within %s: %w", sb.cellID, w.d.cfg.AgentTimeout, last)
	}
	w.mu.Lock()
	sb.ready = true
	w.mu.Unlock()
	return nil
}

// standbyLog is the warm pool's logger for standby sb: its lines name
// its pool and its cell.
func (w *warmPool) standbyLog(sb *standby) *slog.Logger {
	return w.log.With("pool", sb.pool, "cell", sb.cellID)
}

// event wakes the wait of the booting standby whose instance the plugin's
// event says runs (eventWatch hands it every event no pod's cell took),
// or every booting standby's for a nil event (the stream was lost with
// its events).
func (w *warmPool) event(e *pluginapi.Event) {
	if e != nil && (e.Type != pluginapi.EventStateChange || e.State != pluginapi.StateRunning) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sb := range w.standbys {
		if e == nil || sb.cellID == e.CellID || (sb.inst != nil && sb.inst.ID == e.InstanceID) {
			select {
			case sb.booted <- struct{}{}:
			default:
			}
		}
	}
}

// end terminates standby sb, which is no longer in the pool, for reason.
func (w *warmPool) end(ctx context.Context, sb *standby, reason string) {
	w.d.metrics.WarmTerminated(sb.pool, reason)
	if sb.inst != nil {
		// Run's end stops it: the next run finds the standby too old.
		w.busy.Go(func() { w.d.terminator.terminate(ctx, sb.inst.ID, sb.cellID) })
	}
	w.poke()
}

// take gives a pod whose ranked candidates are cands the cheapest ready
// standby that is one of them (its type, zone and capacity type; not a
// candidate that needs unlimited CPU credits, which a standby was not
// launched with) and costs at most (1+maxPremium) times the best
// candidate, or the best candidate itself when prices are unknown. The
// standby leaves the pool for good; assign runs under the pool's lock, so
// that the cell ID is always the pool's or the pod's cell's (the garbage
// collector terminates instances neither knows). It reports false when no
// standby fits.
func (w *warmPool) take(cands []match.Candidate, assign func(sb *standby, cand match.Candidate)) bool {
	if w == nil || len(cands) == 0 {
		return false
	}
	best := cands[0]
	w.mu.Lock()
	var (
		got  *standby
		with match.Candidate
	)
	for _, sb := range w.standbys {
		if !sb.ready || sb.inst == nil {
			continue
		}
		cand, ok := fitting(cands, sb.inst, sb.offer)
		if !ok || !w.affordable(cand, best) {
			continue
		}
		if got == nil || cand.HourlyPrice < with.HourlyPrice ||
			cand.HourlyPrice == with.HourlyPrice && sb.created.Before(got.created) {
			got, with = sb, cand
		}
	}
	if got != nil {
		delete(w.standbys, got.cellID)
		assign(got, with)
	}
	w.mu.Unlock()
	if got != nil {
		w.d.metrics.WarmAssigned(got.pool)
		w.report()
		w.poke()
	}
	return got != nil
}

// fitting is the candidate that is the standby's offering, if any.
func fitting(cands []match.Candidate, inst *pluginapi.Instance, offer match.Candidate) (match.Candidate, bool) {
	zone, ct := inst.Zone, inst.CapacityType
	if zone == "" {
		zone = offer.Zone
	}
	if ct == "" {
		ct = offer.CapacityType
	}
	for _, c := range cands {
		if c.InstanceType == inst.InstanceType && c.Zone == zone && c.CapacityType == ct && !c.UnlimitedCredits {
			return c, true
		}
	}
	return match.Candidate{}, false
}

// affordable reports whether cand may be taken instead of best: it is
// best, or both prices are known and cand's is within the premium.
func (w *warmPool) affordable(cand, best match.Candidate) bool {
	if cand.InstanceType == best.InstanceType && cand.Zone == best.Zone && cand.CapacityType == best.CapacityType {
		return true
	}
	return cand.PriceKnown && best.PriceKnown && cand.HourlyPrice <= best.HourlyPrice*(1+w.maxPremium)+1e-12
}

// knows adds the cell IDs of the standbys to ids (the garbage collector's
// known cells).
func (w *warmPool) knows(ids map[string]bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.standbys {
		ids[id] = true
	}
}

// sync drops the ready standbys whose instance is no longer in list (or
// ends), as the garbage collector lists them, for the pool to replace.
func (w *warmPool) sync(list []pluginapi.Instance) {
	if w == nil {
		return
	}
	alive := map[string]bool{}
	for _, inst := range list {
		if inst.State != pluginapi.StateTerminated && inst.State != pluginapi.StateTerminating {
			alive[inst.ID] = true
		}
	}
	var lost []*standby
	w.mu.Lock()
	for id, sb := range w.standbys {
		if sb.ready && sb.inst != nil && !alive[sb.inst.ID] {
			delete(w.standbys, id)
			lost = append(lost, sb)
		}
	}
	w.mu.Unlock()
	for _, sb := range lost {
		w.log.Warn("standby cell's instance ended; replacing it", "pool", sb.pool, "cell", sb.cellID, "instance", sb.inst.ID)
		w.d.metrics.WarmTerminated(sb.pool, metrics.WarmEndLost)
		w.d.metrics.InstanceDown(sb.inst.ID, w.d.now())
	}
	if len(lost) > 0 {
		w.report()
		w.poke()
	}
}

// adopt takes back a standby instance found at start-up that runs no pod:
// it rejoins its pool if the pool is still configured, has room and inst
// is younger than its maxAge; a booting one goes on booting. It reports
// why not otherwise.
func (w *warmPool) adopt(ctx context.Context, inst pluginapi.Instance) (string, bool) {
	name := inst.Tags[TagWarmPool]
	if w == nil {
		return fmt.Sprintf("pool %s is no longer configured", name), false
	}
	created := inst.LaunchedAt
	if created.IsZero() {
		created = w.d.now()
	}
	w.mu.Lock()
	p := w.poolLocked(name)
	switch {
	case p == nil:
		w.mu.Unlock()
		return fmt.Sprintf("pool %s is no longer configured", name), false
	case w.countLocked(name) >= p.cfg.Count:
		w.mu.Unlock()
		return fmt.Sprintf("pool %s has its %d standby cells", name, p.cfg.Count), false
	case w.d.now().Sub(created) >= p.cfg.MaxAge:
		w.mu.Unlock()
		return fmt.Sprintf("older than pool %s's maxAge %s", name, p.cfg.MaxAge), false
	}
	offer := match.Candidate{InstanceType: inst.InstanceType, Zone: inst.Zone, CapacityType: inst.CapacityType}
	if cat, err := w.d.placement.catalog.get(ctx); err == nil {
		if cands, err := cat.Rank(match.Requirements{CapacityTypes: []pluginapi.CapacityType{inst.CapacityType},
			InstanceTypes: []match.NamePattern{{Pattern: inst.InstanceType}}, Zones: nonEmpty(inst.Zone)}, nil, w.d.cfg.Match); err == nil {
			offer = cands[0]
		}
	}
	sb := &standby{pool: name, cellID: inst.CellID, offer: offer, created: created, inst: &inst, booted: make(chan struct{}, 1)}
	running := inst.State == pluginapi.StateRunning && inst.PrivateAddress() != ""
	sb.ready = running
	w.standbys[sb.cellID] = sb
	w.mu.Unlock()
	w.d.metrics.InstanceUp(inst.ID, placementOf(placedAnnotations(offer, inst.Zone)), w.d.now())
	if !running {
		w.busy.Go(func() {
			if err := w.ready(ctx, sb); err != nil && ctx.Err() == nil {
				w.mu.Lock()
				delete(w.standbys, sb.cellID)
				w.mu.Unlock()
				w.log.Warn("adopted standby cell failed to boot", "pool", name, "cell", sb.cellID, "error", err)
				w.d.terminator.terminate(ctx, inst.ID, sb.cellID)
				w.d.metrics.WarmTerminated(name, metrics.WarmEndBootFail)
				w.poke()
			}
			w.report()
		})
	}
	w.report()
	return "", true
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// poolLocked is the pool named name, or nil; w.mu is held.
func (w *warmPool) poolLocked(name string) *poolState {
	for _, p := range w.pools {
		if p.cfg.Name == name {
			return p
		}
	}
	return nil
}

// countLocked is how many standbys pool name has, booting or ready.
func (w *warmPool) countLocked(name string) int {
	n := 0
	for _, sb := range w.standbys {
		if sb.pool == name {
			n++
		}
	}
	return n
}

// counts is how many standbys each pool has, booting and ready.
func (w *warmPool) counts() map[string][2]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][2]int{}
	for _, p := range w.pools {
		out[p.cfg.Name] = [2]int{}
	}
	for _, sb := range w.standbys {
		n := out[sb.pool]
		if sb.ready {
			n[1]++
		} else {
			n[0]++
		}
		out[sb.pool] = n
	}
	return out
}

// report sets kip_warm_cells.
func (w *warmPool) report() {
	if w.d.metrics == nil {
		return
	}
	for name, n := range w.counts() {
		w.d.metrics.WarmCells(name, metrics.WarmBooting, n[0])
		w.d.metrics.WarmCells(name, metrics.WarmReady, n[1])
	}
}

// askPod asks the agent of standby instance inst which pod it runs
// (empty: none), within warmAskTimeout: the agent is the record of a
// standby's assignment, which its tags cannot carry.
func (d *cellDeps) askPod(ctx context.Context, inst pluginapi.Instance) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, warmAskTimeout)
	defer cancel()
	if _, err := d.joinAttempt(ctx, inst.CellID, &inst); err != nil {
		return "", fmt.Errorf("joining the standby cell: %w", err)
	}
	tlsConfig, err := d.identity.ClientTLSConfig(inst.CellID)
	if err != nil {
		return "", fmt.Errorf("asking the standby cell for its pod: %w", err)
	}
	agent, err := d.dial(inst.CellID, inst.PrivateAddress(), tlsConfig)
	if err != nil {
		return "", fmt.Errorf("asking the standby cell for its pod: %w", err)
	}
	defer agent.Close()
	return agent.PodUID(ctx)
}

// warmAskTimeout bounds asking a standby's agent, at start-up, which pod
// it runs.
const warmAskTimeout = 20 * time.Second

// takeWarm gives the cell a ready standby of the warm pool that fits the
// pod (warmPool.take) instead of a launch: the cell takes the standby's
// ID and instance, and the pod gets an AssignedWarmCell event and the
// placement annotations a launch gives. A pod with launch options (its
// security groups, instance profile or volume size: a standby was
// launched without them) is never given one. It returns nil when no
// standby fits.
func (c *cell) takeWarm(cands []match.Candidate, opts launchOptions) *pluginapi.Instance {
	w := c.d.warm
	if w == nil {
		return nil
	}
	if len(opts.securityGroups) > 0 || opts.instanceProfile != "" || opts.volumeSizeGiB != 0 {
		c.warmMiss()
		return nil
	}
	var (
		inst   *pluginapi.Instance
		id     string
		pool   string
		placed map[string]string
		with   match.Candidate
	)
	if !w.take(cands, func(sb *standby, cand match.Candidate) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.setID(sb.cellID, 0) // its log lines name the standby's ID from now on
		c.instance = sb.inst
		c.placed = placedAnnotations(cand, sb.inst.Zone)
		c.enterLocked(phaseLaunching)
		inst, id, pool, placed, with = sb.inst, sb.cellID, sb.pool, c.placed, cand
	}) {
		c.warmMiss()
		return nil
	}
	c.launchIssued()
	c.instanceUp(inst.ID, placed)
	where := inst.InstanceType
	if inst.Zone != "" {
		where += " in " + inst.Zone
	}
	what := fmt.Sprintf("%s (%s, %s)", where, with.CapacityType, priceText(with))
	c.log().Info("assigned a standby cell of the warm pool", "pool", pool, "instance", inst.ID, "type", inst.InstanceType, "zone", inst.Zone)
	c.waiting("ContainerCreating", fmt.Sprintf("assigned warm cell %s on %s", id, what))
	c.event(corev1.EventTypeNormal, ReasonAssignedWarmCell, "assigned warm cell %s of pool %s on %s, instance %s", id, pool, what, inst.ID)
	return inst
}

// warmMiss counts, once per cell, a pod that no standby fitted.
func (c *cell) warmMiss() {
	c.mu.Lock()
	missed := c.warmMissed
	c.warmMissed = true
	c.mu.Unlock()
	if !missed {
		c.d.metrics.WarmMissed()
	}
}

// adoptStandbys handles the standby instances found at start-up: each
// agent is asked which pod it runs (the agent is the record of an
// assignment). One that runs a pod still bound to this node, neither
// deleted nor ended, becomes that pod's cell; one that runs another pod
// is terminated; one that runs none goes back to its pool
// (warmPool.adopt), or is terminated when its pool is gone or full or it
// aged. One whose agent does not answer is terminated: whether it runs a
// pod is not known, and a standby that does could not be given to
// another. A booting one (not yet running) goes back to its pool.
func (g *collector) adoptStandbys(ctx context.Context, standbys []pluginapi.Instance, byUID map[string]*corev1.Pod) {
	type answer struct {
		uid string
		err error
	}
	answers := make([]answer, len(standbys))
	var wg sync.WaitGroup
	for i, inst := range standbys {
		if inst.State != pluginapi.StateRunning || inst.PrivateAddress() == "" {
			continue // booting: no pod was given it
		}
		wg.Go(func() {
			uid, err := g.deps.askPod(ctx, inst)
			answers[i] = answer{uid, err}
		})
	}
	wg.Wait()
	for i, inst := range standbys {
		pool := inst.Tags[TagWarmPool]
		a := answers[i]
		switch {
		case a.err != nil:
			g.log.Warn("terminating a standby cell whose agent does not say which pod it runs", "pool", pool, "cell", inst.CellID,
				"instance", inst.ID, "error", a.err)
			g.deps.metrics.WarmTerminated(pool, metrics.WarmEndUnknowable)
			go g.terminator.terminate(ctx, inst.ID, inst.CellID)
		case a.uid != "":
			pod := byUID[a.uid]
			if pod == nil || pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) {
				g.log.Info("terminating a standby cell whose pod is gone", "pool", pool, "cell", inst.CellID, "instance", inst.ID, "pod_uid", a.uid)
				go g.terminator.terminate(ctx, inst.ID, inst.CellID)
				continue
			}
			c := newCell(g.deps, pod, &inst)
			if g.cells.add(c) == nil {
				g.log.Info("adopting a pod's standby cell", "pod", key(pod.Namespace, pod.Name), "pool", pool, "cell", c.id, "instance", inst.ID)
				c.start(ctx)
			}
		default:
			if why, ok := g.deps.warm.adopt(ctx, inst); !ok {
				g.log.Info("terminating a standby cell no pool needs", "pool", pool, "cell", inst.CellID, "instance", inst.ID, "reason", why)
				g.deps.metrics.WarmTerminated(pool, metrics.WarmEndUnneeded)
				go g.terminator.terminate(ctx, inst.ID, inst.CellID)
				continue
			}
			g.log.Info("standby cell back in its pool", "pool", pool, "cell", inst.CellID, "instance", inst.ID)
		}
	}
}
