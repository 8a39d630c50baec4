// Package cells runs the cell lifecycle: one cell (one instance, through
// the cloud plugin) per pod bound to the virtual node, each driven through
// one state machine (below).
//
// The Manager implements host/node.Pods for virtual-kubelet's pod
// controller. CreatePod, UpdatePod and DeletePod only record intent and
// return; a goroutine per cell does the work and retries what is
// transient, because virtual-kubelet turns a returned error into a Failed
// pod for restartPolicy=Never. Status is pushed to virtual-kubelet as it
// changes (PodNotifier), never polled.
//
// # The state machine
//
// A cell's phase is one field (phase.go: cellPhase), which its goroutine
// (cell.run) moves at each step; whoever ends the cell moves it to
// ending, and the end's work (terminate) to ended. kip_cells and /cells
// count the phases under the names in brackets (metrics.CellPhases):
//
//	admitted [Pending]       made by CreatePod, or by adoption after a restart
//	  │ admitted (admit.go)       rejected: ended at once, no instance
//	  ▼                           adopted: its instance, booting
//	placing [Pending]        ranked; a pod nothing fits, or whose choice is
//	  │                           refused, stays here
//	  │ a Launch issued (launchInstance), or a standby taken (takeWarm)
//	  ▼
//	launching [Launching]    refused: ranked again after a back-off, here
//	  │ the instance answered, was found launched, or is the standby's
//	  ▼
//	booting [Booting]        awaitRunning: it ended, disappeared or did not
//	  │                           run within BootTimeout: ending (lost)
//	  │ the cloud says it runs
//	  ▼
//	joining [Connecting]     its address (awaitRunning), joinUntil, the dial,
//	  │                           the services, the first Apply; the agent
//	  │                           silent past AgentTimeout (bootFailed):
//	  │                           launching, the pod's next cell (placing,
//	  │                           if adopted), or after the last ending (boot
//	  │                           failed); no dial: ending (lost)
//	  │ the agent answered
//	  ▼
//	running [Running]        the pod's end: ending (finished); the
//	                              instance's (checkLost): ending (lost)
//
//	any phase before ending ─┬─ the pod deleted ─────────────────────┐
//	                         └─ a spot interruption with time left ──┴─▶ ending [Terminating]
//	ending ── terminate: the instance ended ──▶ ended [Gone] ── the pod deleted ──▶ forgotten
//
// Each way a cell ends is a move to ending with its reason (terminate.go,
// cellEnd: failedEnd, finishedEnd, evictedEnd, deletedEnd), which says
// what the end does besides ending the instance: fail or evict the pod,
// stop its containers within a grace period, keep its logs, forget the
// cell. A cell ending only ends, and one that ended stays so: the pod's
// status is kept until the pod is deleted. The rest (the pod's phase, the
// launch's measures, the instance's price) is derived or kept beside it.
//
// Launch, the wait for the instance to run and the join are each one step
// (launchInstance, awaitRunning, joinUntil with joinAttempt), which a
// standby of the warm pool takes as a pod's cell does: the same retries,
// the same classification of the plugin's answers, the same rule for an
// instance that disappears while booting.
//
// # Placement
//
// Before launching, the pod's requirements are ranked against the plugin's
// catalog (host/match; the catalog is fetched once per Config.CatalogTTL).
// The first candidate is launched in its zone with its capacity type; an
// InsufficientCapacity answer marks that offering unavailable for
// Config.UnavailableTTL and the next candidate is launched. The chosen
// type, zone, capacity type and hourly price go into a LaunchingCell event
// and the pod's cell.kipcell.io/* annotations (sent with the status, which
// the API server accepts from the node). A pod nothing fits stays Pending
// with status reason NoInstanceType, a warning event with the matcher's
// explanation, and no instance; it is matched again when it changes or
// after Config.RematchInterval. Config.Choices (host/choices) bounds, per
// namespace and ServiceAccount, what a pod may choose about its instance
// (types, capacity, GPU, identity, firewall, volume, a price ceiling): a
// pod whose choice its rule refuses stays Pending the same way, with
// reason ChoiceForbidden.
//
// An offering out of capacity, or covered by a quota that says what it
// covers (pluginapi.QuotaExceededError's scope: a spot quota, a vCPU
// quota's types), is skipped for Config.UnavailableTTL (QuotaExceeded
// event). A launch refused for good (InvalidConfig, Unsupported) leaves the
// pod Pending with a LaunchFailed event, tried again after RefusedRetry,
// doubling to 30 minutes, or when the pod changes (launch.go says why not
// Failed).
//
// The cell ID is derived from the pod UID, so a Launch retried after any
// crash lands on the same instance (the plugin contract makes Launch
// idempotent on it); and before a cell is launched anywhere it is looked
// up by its cell ID, so that an instance whose Launch answer was lost is
// taken rather than a second one launched elsewhere. That look-up, the
// one after a termination, and a booting cell's Describe are shared among
// the cells making them at once (lookup.go: one call that started after
// each caller asked, so nothing older than its own call would be), and a
// terminated cell looks for a lost instance only when one may exist (its
// Launch failed once, or the pod had earlier cells): a burst of N pods
// costs a few Lists and Describes, not 2N and N.
//
// # Warm pool
//
// Config.WarmPool (cells.warmPool in kip.yaml; warmconfig.go) lists
// pools of standby cells kept booted, each of a shape (an instance type,
// or a size the matcher maps to the cheapest type that fits it, as it
// would a pod of that size), a zone (or the cheapest offering's), a
// capacity type, a count, a maxAge and an optional maxPricePerHour (a
// pool dearer than it, or of unknown price, is refused with an error in
// the log and never launched). warm.go keeps each pool's count of
// standbys, booting and ready, never more, where the Manager runs (Run:
// with leader election, the leader): a standby is launched under a cell ID
// derived from no pod (kip-warm-<16 hex digits>), with an empty PodUID and
// the pool's name in the kipcell.io/warm-pool tag (pluginapi.TagWarmPool);
// its bootstrap names no pod. It is launched, waited for and joined by
// a pod's cell's steps (launchInstance, awaitRunning, joinUntil with
// joinAttempt): once its instance runs its agent is joined (its join
// token would not outlast maxAge otherwise) and it is ready. A standby
// past maxAge is terminated and replaced; one whose instance ended
// (the garbage collector's List), or ended or disappeared while booting,
// is replaced; a failed launch backs its pool off (capacity and quota
// mark the offering as a pod's launch does, anything else waits
// RefusedRetry, doubling).
//
// Before a pod's cell launches, its ranked candidates are matched against
// the ready standbys (takeWarm): one whose type, zone and capacity type is
// a candidate (not one needing unlimited CPU credits) and costs at most
// (1 + WarmPool.MaxPremium) times the best candidate (default 0: no
// dearer; with prices unknown, the best candidate only) is taken, the
// cheapest (then the oldest) of them. A pod with launch annotations
// (security groups, instance profile, volume size) takes none. The cell
// takes the standby's ID and instance for good: the pod gets an
// AssignedWarmCell event naming the pool, the offering and the instance,
// and the cell.kipcell.io/* annotations; ApplyPod goes to the standby's
// agent, whose first ApplyPod binds it to the pod for good (the agent
// keeps it on its disk). The pool refills in the background; a pod's cell
// never returns to the pool and ends as any cell does.
//
// A standby's tags cannot say which pod it was given: after a restart,
// adoption (gc.go, warm.go's adoptStandbys) asks each standby's agent
// (cellclient.Agent.PodUID, the pod_uid of its status stream). One running
// a pod still on the node becomes that pod's cell; one running a pod that
// is gone is terminated; one running none returns to its pool, or is
// terminated when its pool is no longer configured, has its count, or the
// standby is past maxAge; one whose agent does not answer within 20 s is
// terminated (whether it runs a pod is unknown, and it could not be given
// to another). A booting one returns to its pool and boots on.
//
// # Boot deadline
//
// Once its instance runs, a cell's agent has Config.AgentTimeout to
// answer (boot.go, serveWithin): whatever keeps it silent (a broken image,
// a security group, a join refused) ends there. The instance is
// terminated, the pod gets a CellBootFailed event with the last lines of
// the instance's console output (the plugin's ConsoleOutput, where
// offered), and the cell is launched again under a new cell ID (a cell ID
// names one instance for good): kip-<uid>-r<n>, after Config.BootRetry,
// doubling, up to Config.BootAttempts cells; a pod with restartPolicy
// Never, or past the last attempt, fails with reason CellBootFailed.
// Adoption after a restart takes a pod's newest cell and ends the others. The Manager also terminates cells whose pod is gone
// without a DeletePod (virtual-kubelet force-deletes pods that never ran
// without telling the provider) and cells nobody knows (after a restart),
// and re-adopts running cells of pods that still exist.
//
// # Admission
//
// Before a cell is launched, the pod is admitted as a kubelet admits it
// (admit.go): a privileged container where Config.AllowPrivileged is
// false, or a sysctl outside the kubelet's safe set and
// Config.AllowedUnsafeSysctls (or a net.* one with hostNetwork, an IPC
// one with hostIPC), rejects the pod: phase Failed, reason
// PrivilegedForbidden or SysctlForbidden, message "Pod was rejected:
// ...", a Warning event with the reason, and no instance. So does what
// Pod Security's baseline level refuses because it would reach past the
// pod, unless a setting opens it: hostNetwork (AllowHostNetwork), hostPath
// volumes (AllowedHostPaths), added capabilities beyond
// BaselineCapabilities (AllowedCapabilities), a probe's or a hook's host
// (AllowProbeHosts: the agent sends them from outside the pod); and
// hostPID, hostIPC, hostUsers: false and procMount Unmasked, which a cell
// does not give.
// Each message names the field. An adopted cell was admitted by the kip
// that launched it.
//
// An ephemeral container (kubectl debug) comes to a running pod; the
// container rules above apply to it (ephemeral.go): one that breaks one
// never reaches the agent and is reported Terminated (exit code 128) with
// the rule's reason and message and a Warning event; the pod runs on.
//
// # Layout
//
// The Manager (manager.go) only wires small types, each in its own file,
// and implements host/node.Pods over them (pods.go; logs, exec, attach and
// port-forward in streams.go; host/node.StatsProvider in stats.go, which
// asks every running cell's agent at once, each within
// Config.StatsTimeout, and leaves out, with a log line, a cell that does
// not answer):
//
//   - cellSet (cellset.go): the cells, by pod UID and by namespace/name.
//   - notifier (notify.go): statuses pushed to virtual-kubelet, coalesced.
//     Each status carries the conditions others own from the API's pod,
//     and Ready honours the pod's readinessGates (conditions.go, the
//     kubelet's rules); PodUpdated, the pod informer's update handler,
//     sends a status again when those conditions change.
//   - catalogCache (catalog.go): the plugin's catalog and capabilities,
//     read together and kept for Config.CatalogTTL.
//   - placement (placement.go): a pod's ranked candidates, the offerings
//     marked unavailable, and the placement annotations.
//   - registryCreds (registry.go): the cloud registry's credentials.
//   - eventWatch (events.go): the plugin's instance events, each handed
//     to its cell.
//   - collector (gc.go): adoption at start-up and garbage collection.
//   - warmPool (warm.go): the standby cells of the warm pool.
//   - terminator (terminate.go): Terminate, retried.
//
// Config's koanf-tagged fields are the cells section of kip.yaml
// (config.go: DefaultConfig, Validate); the daemon sets the others.
//
// A cell is handed a cellDeps (cell.go), built once in New: the plugin's
// instance calls behind a narrow interface, placement, the agent's dialer
// and pod data, and where its status and its end go. It never reaches
// back into the Manager. Its life is one goroutine (cell.run), its phase
// one field (phase.go), in a file per step: launch.go (placement and
// Launch, capacity fallback; the annotations that shape the instance in
// launchopts.go), boot.go (waiting for the instance to run, the agent's
// deadline), join.go (joining the agent before it is dialled: the CA signs the certificate of the agent's own key for the
// bootstrap's token, after the plugin's instance identity check where it
// offers one; a refusal is a CellJoinFailed event, once per message, and
// is tried again; an agent found unjoined after its status stream broke
// is asked again too), serve.go (the agent: the cluster's
// ClusterIP services first when the Manager has a ServiceTable
// (WithServices; host/clusterip's Sync), then Apply, the status stream,
// a lost instance) and terminate.go (the ways a cell ends, and its
// end's work: stopping the pod, keeping its logs, ending the instance,
// forgetting the cell).
//
// # Spot interruptions
//
// The cloud's notice that it reclaims a spot instance comes either from
// the plugin's events (WatchEvents: EventBridge, the instance's state
// reason) or from the agent's status stream (cellapi.InstanceNotice: EC2's
// two-minute warning, which appears only in the instance's metadata);
// both take one path (interrupt.go). The first notice records a
// SpotInterruption event. With time left before the instance goes, the
// pod is evicted as the kubelet's graceful node shutdown does it: Failed
// at once with reason Terminated and a DisruptionTarget condition, so that
// its controller replaces it, its containers stopped within their grace
// period cut to the time left, their logs kept, and the cell ended. A
// notice without time left evicts nothing: the instance's end fails the
// pod as CellLost, its message naming the interruption. Rebalance
// recommendations become a RebalanceRecommended event, once.
//
// # Volumes that follow the API
//
// A running pod's references are resolved again, as a kubelet's are:
// when one of its service account tokens needs refreshing
// (podrefs.Tokens: at 80 % of its lifetime, or after 24 hours) and every
// Config.VolumeRefreshInterval while it has configMap, secret or projected
// volumes (serve.go, applyLoop). The periodic refreshes of unchanged pods
// read the ConfigMaps and Secrets through podrefs.Cache, as the
// kubelet's Cache strategy does: what any resolution read within half
// the interval, so that a thousand pods mounting their namespace's
// kube-root-ca.crt read it twice a minute, not a thousand times; a pod's
// first resolution, and one after its pod changed, read the API. An
// object's change reaches the pods within one and a half intervals.
// What changed goes to the agent under a
// new generation, and the agent swaps the files in under the running
// containers; what did not change sends nothing. A resolution that fails
// leaves the pod running with the files it has and a FailedMount event.
// An agent already at a later generation (a cell adopted after a restart)
// is sent the pod again past it.
//
// # Disks
//
// kip is the attach-detach controller of its node (disks.go,
// docs/volumes.md). A pod's persistent volumes are resolved before its
// cell is placed (host/volumes: each claim bound to a PV of a driver the
// plugin attaches; a volume that cannot be had keeps the pod Pending with
// FailedAttachVolume, or the kubelet's FailedMount for a lifecycle mode
// the driver's CSIDriver does not list), and each disk's zones, and the
// node's own (Config.Zone), constrain the placement. Once the instance
// runs its disks are attached through the plugin (VolumeAttacher) while
// the agent is joined, and polled until attached by one poller of the
// instance (attachpoll.go: one DescribeVolumeAttachments a round for all
// its disks); a disk attached elsewhere waits with the kubelet's
// Multi-Attach message; a disk the instance's type cannot take
// (wrong-type, disktype.go) is said once, the instance given up, and the
// cell placed again on a type no disk of the pod refused (NoInstanceType
// once none is left). Each attach and detach tells host/node
// (NotifyNodeChanges), which sends the Node's volumesAttached and
// volumesInUse (Volumes) at once, and a plugin swap (RefreshCatalog)
// its volume drivers (VolumeDrivers). The pod is applied with the
// devices (PodRequest.Disks); the agent formats a blank one, mounts it
// and unmounts it when the pod ends. At the end, after the agent stopped
// the pod, every disk the plugin describes on the instance is detached
// and waited for (Config.DetachTimeout) before the instance is
// terminated, and before a cell whose agent never answered is replaced.
// An adopted cell attaches again, which AttachVolume answers with the
// attachment it has: nothing is attached twice.
//
// # A cell lives as long as its pod
//
// A cell's certificate (host/pki: 30 days) is renewed over the host's
// connection to its agent (renew.go, renewLoop: cellclient.Agent.Renew,
// signed by the Identity's Renew) once two thirds of its life, less a
// jitter of up to a sixth, have passed: the agent makes a new key and
// serves the new certificate from its next handshake on, the streams
// open going on. Every handshake tells the loop which certificate the
// agent serves, so a kip started again renews the cells it adopts that
// fell due while it was away, once it has reconnected. One whose
// certificate expired meanwhile serves it still; the join finds it
// (cellclient.Joined.Expired) and renews it on a connection of its own
// (cellclient.Rejoin), which the CA does within its grace after the plugin's
// identity check: a CellCertificateRenewed event. Past that, the pod gets
// a CellCertificateExpired event and its ConditionCellReachable False,
// and kip tries again as for a join. An agent too old to renew
// (UNIMPLEMENTED) is a CellCertificateNotRenewed event saying when the
// certificate expires, as is a renewal that fails (tried again after
// Config.Backoff). The loop looks at Config.Now at least every
// Config.RenewalCheck, so a clock that jumps is noticed.
//
// # Metrics
//
// With WithMetrics, the Manager reports to host/metrics (metrics.go): each
// cell's launch phases, from its pod's binding (the PodScheduled
// condition's time, or when the cell was made) to the first Launch call,
// the instance running, the agent's first answer and the pod Running (a
// cell adopted after a restart is not measured); every ranking's outcome
// and every fallback past the best offering (capacity, quota, spot to
// on-demand); each instance from its launch or adoption to its end, at
// its placement's price; and, when scraped, the cells by phase and the
// pending pods by reason (Manager.Cells, which the admin server's /cells
// serves too).
//
// No struct keeps a context. CreatePod starts a cell under its own
// context, detached from its cancellation (the call ends long before the
// cell); adoption starts one under Run's. A cell runs until its pod is
// deleted or Run ends, which stops every cell; a termination, once begun,
// finishes whatever context asked for it.
//
// It imports pluginapi, host/clusterip, host/match, host/metrics, host/cellclient, host/podrefs, host/setting, cell/api,
// cell/api/sysctl, the kubelet's stats API types and client-go; never
// host/node's implementation or host/config.
package cells
