// Package node is kip's virtual node: the Node object and its Lease, the
// pod lifecycle that virtual-kubelet (v1.13.0, pinned) drives through the
// Pods interface, and the kubelet API on :10250 that kubectl logs, exec,
// attach and port-forward reach through the API server.
//
// It imports virtual-kubelet, client-go, the Kubernetes API types, the
// kubelet's stats API types and host/setting; it never imports host/config or the cell manager
// (host/cells), which implements Pods. Config is the node section of
// kip.yaml: its koanf tags are the keys, DefaultConfig the defaults and
// Validate the rules.
//
// # Using it
//
//	client := kubernetes.NewForConfig(node.ClientConfig(restCfg))      // 50 QPS, burst 100
//	events := kubernetes.NewForConfig(node.EventClientConfig(restCfg)) // its own 50 QPS
//	recorder, stop := node.NewEventRecorder(ctx, events, name)         // else Run makes one on client
//	cfg := node.DefaultConfig(name)                  // or kip.yaml's node section
//	cfg.Version = version
//	n, err := node.New(client, cells, cfg, log, node.WithEventRecorder(recorder))
//	go n.Run(ctx)                                    // blocks until ctx ends
//	err = n.WaitReady(ctx)
//
// # What it builds, and why not nodeutil.NewNode
//
// Run builds virtual-kubelet's node.PodController and node.NodeController
// itself. nodeutil.NewNode would also start cluster-wide Secret, ConfigMap
// and Service informers, which a node identity (system:node:<name>, under
// the Node authorizer) may not list, and it hides the rate limiters, the
// retry policy, the ping timeout and the client's QPS.
//
//   - The Node's capacity and allocatable are the configured ceiling
//     (node.capacity: cpu, memory, pods, ephemeralStorage) and, when Pods is a
//     ResourceReporter that offers extended resources (the GPU resources
//     of a catalog with GPU instance types), node.capacity.gpus of each:
//     without them the scheduler would never place a pod that requests a
//     GPU here. They are asked for at start and every
//     Config.StatusUpdateInterval, and a change is sent as a new status
//     (NotifyNodeStatus).
//   - The disks attached to the cells and in use (VolumeReporter: the
//     status's volumesAttached and volumesInUse) and the volume drivers
//     are asked for at the same times, and also at once when Pods says
//     they changed (NodeChangeNotifier: a disk attached or detached, the
//     plugin swapped); changes said together make one status update. A
//     status is sent when what it reports changed, and once at the start:
//     a Node registered by a Create lacks virtual-kubelet's last-applied
//     annotations, without which its three-way status patch removes no
//     label.
//   - Without node.internalIP the node's address is this host's first
//     global IPv4 address, looked at again every status update: a new one
//     is reported (and the self-signed serving certificate made for it;
//     a configured certificate stays).
//   - Pods are watched with a field selector spec.nodeName=<name>.
//   - PodController insists on ConfigMap, Secret and Service informers but
//     uses them only to resolve environment variables before CreatePod.
//     SkipDownwardAPIResolution is set (virtual-kubelet resolves
//     status.podIP and resourceFieldRef too early or not at all; the host
//     resolves the environment itself once the cell has its IP), and
//     PodController.Run waits for the pod informer alone to sync, so those
//     three informers come from a factory that is never started.
//   - Status is pushed: Pods is a PodNotifier, so virtual-kubelet never
//     polls GetPodStatus every 5 s.
//   - A pod status write carries the labels, annotations and finalizers
//     of the cached pod of the same resource version, but for the
//     annotations Pods owns (WithOwnedAnnotations): virtual-kubelet sends
//     the pod as last reported, and its stale metadata would undo others'
//     changes (a Job's pod being deleted had its job-tracking finalizer
//     written back, which the API server refuses) (podStatusClient).
//   - The work queues retry a failing key with backoff capped at a minute
//     for 30 minutes rather than 20 times, under a 100 QPS budget instead
//     of 10 (mass deletions are not throttled); a key's first delay is
//     5 ms, virtual-kubelet's default, since every new pod and every
//     status push waits it.
//   - Events are recorded as the node; the Node authorizer allows it.
//   - The Lease (coordination.k8s.io/v1, kube-node-lease/<name>) lasts
//     Config.LeaseDurationSeconds (40) and is renewed every quarter of it; the
//     full status is written every Config.StatusUpdateInterval (1 min).
//   - A deleted Node is registered again, as the kubelet does.
//
// # Readiness and Ping (pitfall: Ping gates the lease)
//
// virtual-kubelet renews the Lease only after a successful Ping, and
// writes no node status while Ping fails. Ping therefore fails only when
// kip is stopping: like a kubelet whose container runtime broke, kip keeps
// its Lease and reports the cell backend's health in the Ready condition.
// When Pods implements HealthChecker and Healthy has failed without
// interruption for Config.HealthGrace (2 min), Ready turns False
// (KubeletNotReady, "cell backend unhealthy since <time>: <error>") and
// the status is sent at once; the node lifecycle controller then taints
// the node not-ready, and after tolerationSeconds (300 s by default) its
// pods are evicted. The first success turns Ready True again. A plugin
// restart or a cell booting must never fail Healthy.
//
// # Labels, the role label and the taint
//
// The Node carries type=virtual-kubelet, kubernetes.io/hostname,
// kubernetes.io/os=linux and kubernetes.io/arch, plus Config.Labels.
//
// kubernetes.io/role=agent is NOT set by default. The NodeRestriction
// admission plugin lets a node identity set only the kubelet's own
// kubernetes.io/ labels (hostname, os, arch, instance-type, zone, region
// and the kubelet.kubernetes.io and node.kubernetes.io prefixes), and
// rejects the Node's registration outright if it carries another one: kip,
// running as system:node:<name>, cannot label itself with the role. When
// Config.SetRoleLabel is off, Run logs (once) the command an administrator
// runs instead:
//
//	kubectl label node kip kubernetes.io/role=agent
//
// Turn SetRoleLabel on only when kip runs with credentials outside
// NodeRestriction (a service account with RBAC on nodes).
//
// The taint (virtual-kubelet.io/provider=kip:NoSchedule by default, or
// none) is registered with the Node. NodeRestriction also forbids a node
// to change its taints later, so a changed configuration on an existing
// Node is reported in the log, not applied.
//
// # The zone and the CSINode
//
// With Config.Zone the Node also carries topology.kubernetes.io/zone and,
// for each of the plugin's volume drivers (Config.VolumeDrivers at start,
// then what Pods answers as a VolumeDriverReporter: a plugin swapped on
// SIGHUP may attach others, and a dropped driver's label and CSINode
// entry go), that driver's zone key (ZoneKey: topology.ebs.csi.aws.com/zone,
// topology.gke.io/zone, topology.disk.csi.azure.com/zone,
// topology.local.csi.kipcell.io/zone), all set to the zone: the zone
// label is on NodeRestriction's list, and labels outside kubernetes.io/
// and k8s.io/ are not restricted. virtual-kubelet's status patch carries
// labels, so a Node registered earlier gets them too.
//
// Once the Node is registered, again whenever it is registered anew, and
// whenever the volume drivers change, Run writes its storage.k8s.io/v1
// CSINode as the kubelet's CSI plugin
// registration does (csinode.go): named and owned by the Node, one driver
// entry per volume driver with the node's name as its node ID and, with
// a zone, the driver's zone key as its topology keys, so that the
// external-provisioner of a WaitForFirstConsumer StorageClass finds the
// zone to create a disk in. The Node authorizer lets a node get, create
// and update the CSINode of its own name (no RBAC is needed). A failed
// write is logged and retried with backoff up to a minute; it never stops
// the node.
//
// # The kubelet API
//
// HTTPS (TLS 1.2+, HTTP/1.1 for upgrades) on Config.ListenAddress. The
// Node advertises InternalIP (Config.InternalIP, or this host's first IPv4
// address) and the real listening port as its kubelet endpoint, so the API
// server can dial it. It advertises no Hostname address: the API server's
// default --kubelet-preferred-address-types tries Hostname first, and the
// node's name resolves nowhere. The serving certificate comes from files or is
// generated self-signed in memory for the IP and the node name.
//
// Routes are virtual-kubelet's api.PodHandler backed by Pods:
// /containerLogs, /exec, /attach, /portForward, /pods and /runningpods/.
// When Pods is a StatsProvider (host/cells is), /stats/summary answers the
// kubelet's Summary (k8s.io/kubelet's stats/v1alpha1, JSON;
// ?only_cpu_and_memory=true as metrics-server asks) with the node as the
// sum of its pods, and /metrics/resource the kubelet's resource metrics
// in the Prometheus text format, names, labels and help texts as in
// pkg/kubelet/metrics/collectors/resource_metrics.go (no swap metrics: a
// cell reports no swap). Other /stats and /metrics paths (cAdvisor's,
// probes') answer 501. RunInContainer
// reports a command's non-zero exit with ExitCode(n); kubectl exec then
// exits with n.
//
// Every request is authenticated and authorized like the kubelet in
// webhook mode, through the node's own client (the Node authorizer lets a
// node create TokenReviews and SubjectAccessReviews):
//   - a client certificate verified against Config.ClientCAFile (the CA of
//     the API server's --kubelet-client-certificate) names the user by CN
//     and O;
//   - otherwise a bearer token is checked with a TokenReview
//     (virtual-kubelet's nodeutil.WebhookAuth, cached 2 min);
//   - anything else gets 401 Unauthorized;
//   - the user must then be allowed the HTTP method's verb on
//     nodes/<name> with subresource proxy (log, stats or metrics for those
//     paths), by SubjectAccessReview (allow cached 5 min, deny 30 s):
//     403 Forbidden otherwise.
//
// Client certificates are verified here rather than through
// WebhookAuthConfig's ClientCertificateCAContentProvider because that
// needs a k8s.io/apiserver type, and k8s.io/apiserver is only an indirect
// requirement of kip's module.
package node
