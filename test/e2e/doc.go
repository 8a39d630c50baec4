// Package e2e holds Kip's end-to-end tests. They run against a real control
// plane (built from source and cached, started once per run by TestMain)
// and only with the e2e build tag: make e2e, or
//
//	go test -tags e2e -race ./test/e2e/...
//
// Environment:
//
//	KIP_E2E_PLUGIN=local|aws|gce|azure  the pass: the plugin kip runs with
//	                           (default local; aws runs against the EC2
//	                           simulator, gce against the Compute Engine
//	                           simulator, azure against the ARM simulator)
//	KIP_E2E_ALL=1              a cloud's pass runs the full pass's tests
//	                           too, not only the plugin path's and its own
//	KIP_E2E_RACE=0|1           kip, kip-cell and the plugins built with
//	                           -race: on in every pass when the tests
//	                           are (go test -race); 1 or 0 says so
//	                           whatever they are
//	KIP_E2E_KEEP_LOGS=DIR      copy kip's and the simulator's full logs
//	                           into DIR when the run ends, named after
//	                           each kip's node (DIR/kip.kip.log,
//	                           DIR/kip.gcesim.log)
//	KIP_E2E_CLUSTER_DNS=1|0    deploy CoreDNS as the cluster DNS
//	                           (kube-system/kube-dns, on the kubelet
//	                           node kip-infra) before the tests; by
//	                           default in the full pass, not in a
//	                           cloud's, whose tests do not need it
//	                           (framework.ClusterDNSFor)
//
// # Passes
//
// make e2e runs this package four times. The full pass (KIP_E2E_PLUGIN=local)
// runs every test but those about a cloud's simulator, with kip, kip-cell
// and the plugins built with -race (in every pass): a race they report
// fails the run.
// A cloud's pass runs the plugin path, behind that cloud's simulator, and
// the tests about that cloud. Behind a simulator a cell is the same local
// cell as in the full pass, so a test of what happens inside a cell, or in
// kip between the API server and a cell, learns nothing more there.
//
// A test says where it runs by a marker, the first statement of its body,
// which TestMain reads from the source (framework.ReadPlan) to choose the
// pass's tests before any runs:
//
//   - no marker: a core test, run by the full pass alone. A new test is
//     core unless it says otherwise;
//   - framework.PluginPath(t): the test exercises the plugin path (launch,
//     boot, join, sizing from the plugin's catalog, a cell's end, the
//     plugin process itself): every pass runs it;
//   - framework.AlsoIn(t, cloud, why): a core test that also exercises
//     something of that cloud, incidentally: that cloud's pass runs it too,
//     on purpose, and only that one;
//   - framework.Only(t, clouds...): a test about those clouds' simulators
//     (their faults, their metadata, their APIs' rules): their passes run
//     it, the full pass does not.
//
// The table below is every test, its passes and why; TestPassList (make
// test) fails when a test is missing from it, when its passes are not what
// its marker says, or when a marker is misplaced. test/kubeletnode runs
// in the full pass, beside this package.
//
//	test                                          passes         why
//	TestDeploymentRunsInCells                     all            a Deployment's cells launched, booted and joined through the plugin; status, logs, exec and delete
//	TestJobSucceedsAndCellEnds                    all            a finished pod's cell terminated through the plugin
//	TestRunningJobPodDeleted                      all            a running pod deleted: its cell ends through the plugin
//	TestSilentCellIsNoticed                       all            a silent agent behind the plugin's instance, noticed and reached again
//	TestPluginSwapUnderRunningPods                all            the plugin binary swapped under running cells
//	TestPodGetsItsAddressFromThePlugin            all            the pod's address asked for and read by the plugin (EC2's secondary private address, a GCE alias IP, an Azure IP configuration), held by the pod only
//	TestPodCannotReachItsInstanceMetadata         aws gce azure  the cloud's metadata at 169.254.169.254 (the simulator's, off the cell): answered in the cell, unreachable from its pod
//	TestUserDataHoldsNoWorkingSecret              all            what the plugin hands an instance to boot from holds no working secret
//	TestPodsAreRightSized                         all            the cheapest type of the plugin's catalog that fits, launched as placed
//	TestImpossiblePodStaysPending                 all            a pod no type of the plugin's catalog fits
//	TestHAKillLeaderMidBurst                      local aws      a takeover adopting the instances of a burst through the plugin's List: once, in the aws pass
//	TestWarmPool                                  local gce      the warm pool; in the gce pass its standbys launched without a pod and adopted through the plugin
//	TestInsufficientCapacityFallsToTheNextType    aws            capacity fallback on EC2's InsufficientInstanceCapacity
//	TestSpotInterruptionReplacesThePod            aws            EC2 reclaims a spot instance
//	TestSpotInterruptionNoticeDrainsThePod        aws            EC2's two-minute warning in the instance's metadata
//	TestThrottledPluginStillRunsEveryPod          aws            EC2's RequestLimitExceeded and the aws plugin's rate limit
//	TestAnnotationRefusedByTheAllowList           aws            the aws plugin's instance-profile allow-list
//	TestKillBetweenLaunchAndAnswer                aws            EC2's eventual consistency and RunInstances' ClientToken
//	TestNeverBootingAgentFailsAPodThatNeverRestarts aws gce azure  an instance whose agent never starts: boot timeout, the console's output
//	TestNeverBootingAgentIsRelaunched             aws gce azure  an instance whose agent never starts: a new instance
//	TestSpotQuotaFallsBackToOnDemand              aws gce azure  each cloud's spot quota error, and the fallback to on-demand
//	TestGCEStockoutFallsToTheNextType             gce            capacity fallback on ZONE_RESOURCE_POOL_EXHAUSTED
//	TestGCEPreemptionReplacesThePod               gce            Compute Engine preempts a Spot instance
//	TestGCEThrottledPluginStillRunsEveryPod       gce            Compute Engine's rateLimitExceeded and the gce plugin's rate limit
//	TestGCECellsJoinWithTheirIdentityToken        gce            the instance's identity token checked by the gce plugin at join
//	TestAzureAllocationFailureFallsToTheNextSize  azure          capacity fallback on AllocationFailed
//	TestAzureSpotEvictionReplacesThePod           azure          Azure evicts a Spot VM
//	TestAzureThrottledPluginStillRunsEveryPod     azure          ARM's 429 with Retry-After and the azure plugin's rate limit
//	TestAgentRestart                              local          the agent killed and restarted in its cell (a simulator only plays systemd)
//	TestCrashLoopBackOff                          local          the restart policy and back-off, in the agent
//	TestMissingImage                              local          an image pull failing in the cell
//	TestActiveDeadline                            local          the pod's deadline, kept by the agent
//	TestReadinessProbe                            local          probes, in the agent
//	TestLivenessProbeRestarts                     local          probes, in the agent
//	TestStartupProbeGatesLiveness                 local          probes, in the agent
//	TestPreStopRunsBeforeSIGTERM                  local          lifecycle hooks, in the agent
//	TestPreviousLogsAfterCrash                    local          container logs, in the agent and kip
//	TestTerminationMessage                        local          termination messages, in the agent
//	TestLoudPodKeepsItsLog                        local          container logs rotated, streamed and kept: 2 GB of lines and a 200 MB line, twice each, in a cell of 512 MiB
//	TestPodPastItsEphemeralStorageIsEvicted       local          a pod's output counted against its ephemeral-storage limit: Evicted as by the kubelet, its log kept
//	TestSidecarInitContainer                      local          sidecar containers, in the agent
//	TestReadinessGates                            local          readiness gates, in kip's status writes
//	TestSecretVolumes                             local          volumes kip resolves and the agent mounts
//	TestServiceAccountToken                       local          the projected token kip requests
//	TestVolumesFollowTheirObjects                 local          volumes refreshed by kip
//	TestImageVolume                               local          image volumes pulled and mounted read-only by the agent; a missing image's events and waiting reason
//	TestReferencesEventsAndAttach                 local          references, events and attach through kip
//	TestKubectlDebug                              local          kubectl debug: ephemeral containers in the target's PID namespace, their status, logs, exec, attach and events in the agent; kubectl's default profile (SYS_PTRACE) and a privileged one refused by kip
//	TestStatefulSetKeepsItsData                   all            a StatefulSet's disks attached through the plugin, formatted and mounted by the agent, detached and attached again to a pod's new cell
//	TestBlockVolumeAndRefusedDisks                all            a Block disk as a device through the plugin; a disk in use elsewhere and one in another zone (the plugin's wrong-zone), each with its event
//	TestNFSVolumes                                local          NFS shares the agent mounts (inline, and a claim of spec.nfs), from a server pod; a server only the instance reaches refused before launch
//	TestKillBetweenAttachAndStart                 aws            kip killed after attaching a disk, before its pod started: adopted, attached once, detached at the end (EC2 refuses a second attach)
//	TestSecurityRunAsUser                         local          the security context, in the agent
//	TestSecurityRunAsNonRoot                      local          the security context, in the agent
//	TestSecurityReadOnlyRoot                      local          the security context, in the agent
//	TestSecurityPrivilegedRefused                 local          kip's admission before any launch
//	TestSecurityBaselineRefused                   local          kip's admission before any launch
//	TestSubPathCannotLeaveItsVolume               local          the agent's volume mounts, inside a cell
//	TestCellSizeBoundsItsPod                      local          the local plugin's cgroups, inside a cell
//	TestOOMKilledContainerRestarts                local          a container's memory limit, its OOM kill and restart, in the agent's cgroups, the agent untouched
//	TestOperatorBoundsInstanceChoices             local          cells.choices, the host's rule before any launch
//	TestPodHasItsOwnNetwork                       local          the agent's pod namespace: NET_ADMIN, hostNetwork, a service mesh's iptables REDIRECT, the cell's rules untouched
//	TestServiceEnvironment                        local          the service variables kip computes
//	TestResolvConfPerPolicy                       local          resolv.conf per dnsPolicy, written by the agent
//	TestHostsAndHostname                          local          /etc/hosts and the hostname, written by the agent
//	TestClusterDNS                                local          the cluster DNS on the kubelet node, reached from a cell
//	TestCoreDNSInCell                             local          CoreDNS in a cell
//	TestClusterIPServices                         local          Services programmed in the cells by kip and the agent
//	TestStats                                     local          the kubelet's stats from the agent, metrics-server and the HPA
//	TestHAStandbyAndSIGTERMHandover               local          leader election and a handover (TestHAKillLeaderMidBurst takes over through a cloud)
//	TestHAKeptLogsSurviveHandover                 local          the kept log of an ended pod, mirrored by the standby, served by it after the handover
//	TestTLSBootstrapIdentity                      local          kip's node identity by TLS bootstrap
//	TestTLSBootstrapRenewal                       local          kip's node certificate renewed
//	TestMetricsAfterABurst                        local          kip's admin server and metrics
//	TestAdminServerAuthorizesCallers              local          kip's admin server: TokenReview and SubjectAccessReview against the API server
//	TestLightCells                                local          light cells, the scale benchmark's harness
//	TestKipRunsInTheClusterFromItsImage           local          kip installed from its image with the local overlay; its pod in a network namespace of its own; a kept log read after a rollout
//	TestManifestsPassServerSideApply              local          every overlay's manifests, the cloud ones too, against the API server
//	TestNodeRegisters                             local          the virtual node (host/node, no plugin)
//	TestNodeRoleLabelForbiddenToNodeIdentity      local          the virtual node (host/node, no plugin)
//	TestNodePods                                  local          the virtual node (host/node, no plugin)
//	TestHarnessNodeIdentityAndScheduling          local          the harness itself
//	TestHarnessKubectl                            local          the harness itself
//	TestPassList                                  local          this table's own check (make test runs it too, without the e2e tag)
package e2e
