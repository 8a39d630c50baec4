// Package match chooses the instance offerings a pod's cell may launch
// on: PodRequirements turns a pod into Requirements, and Catalog.Rank
// turns Requirements and the cloud plugin's catalog into a ranked list of
// Candidates (instance type, zone, capacity type), cheapest first. The host
// launches the first and, on InsufficientCapacity, marks it in an
// Unavailable set and launches the next.
//
// It imports pluginapi, host/setting (Config.Validate's errors),
// k8s.io/api, k8s.io/apimachinery and the standard library; never
// host/cells, host/config or client-go. Config is the match section of
// kip.yaml: its koanf tags are the keys, DefaultConfig the defaults and
// Validate the rules.
//
// # What a pod needs
//
// CPU and memory are computed as the scheduler computes them: the sum of
// the app containers (and sidecars, init containers with restartPolicy
// Always) or, if larger, the largest init container plus the sidecars
// started before it; pod-level resources (spec.resources) when larger;
// plus the pod overhead; plus Config's agent reserve. A container's limit
// stands in for a missing request unless Config.IgnoreLimits. (Elotl Kip
// summed limits and ignored init containers, so a pod whose init container
// needed more than its app got a cell too small to start it.)
//
// GPUs are the extended resources of Config.GPUResources (nvidia.com/gpu,
// amd.com/gpu, gpu.intel.com/i915 by default). Their kind comes from the
// annotation or node selector kipcell.io/gpu-kind, the node selector
// cloud.google.com/gke-accelerator, or Elotl's node selector key
// node.elotl.co/gpu-<kind>; kinds are lower-cased and a "nvidia-tesla-",
// "nvidia-" or "amd-" prefix is dropped, so "nvidia-tesla-t4" is "t4". A
// kind without a GPU count asks for one GPU of that kind. Any other
// extended resource makes the pod unsatisfiable (no catalog offers it)
// unless Config.IgnoredResources lists it.
//
// The architecture comes from the node selector kubernetes.io/arch, or
// else Config.DefaultArch (kip sets the virtual node's architecture: the
// pod's images were scheduled for it); the
// zone from topology.kubernetes.io/zone, the capacity type from the
// annotation or node selector kipcell.io/capacity-type (spot or on-demand),
// the node selector karpenter.sh/capacity-type, or Elotl's annotation
// pod.elotl.co/launch-type (spot or on-demand; dedicated is refused), and
// otherwise Config.DefaultCapacityType (on-demand). A spot pod may also run
// on on-demand only when its annotation kipcell.io/spot-fallback is "true"
// (default Config.SpotFallback, false). Instance-type names come from the
// annotations kipcell.io/instance-type and pod.elotl.co/instance-type and
// the node selectors node.kubernetes.io/instance-type and
// beta.kubernetes.io/instance-type; each is a name or a glob (path.Match:
// "c5.*", "m[56].large") and a type must match all of them. When two
// sources of one constraint disagree, or a value is malformed, the pod is
// refused with a message naming both.
//
// # Ranking
//
// An offering fits when its type matches the names, architecture, GPUs,
// vCPU and memory, its zone and capacity type are acceptable, the catalog
// marks it available and the unavailable function (Unavailable.Contains)
// does not. Fitting offerings are ordered by:
//
//  1. capacity type, in Requirements.CapacityTypes order: a spot pod with
//     fallback gets every spot candidate before any on-demand one;
//  2. known price before unknown price;
//  3. hourly price, ascending, including any surplus-credit charge;
//  4. vCPU, then memory, ascending (the smaller of equal-priced types);
//  5. type name, then zone, ascending.
//
// The order is total, so the result never depends on catalog order.
// At most Config.MaxCandidates (default 20) candidates per capacity type are
// returned. Spot offerings are ranked on their own spot prices (Elotl Kip
// ranked spot pods on on-demand prices).
//
// # Unknown prices
//
// A price with no source (a spot price the plugin could not read, a region
// missing from its price list) is PriceKnown false and is never guessed.
// Under the default rule, UnknownPriceLast, such an offering ranks after
// every priced offering of the same capacity type, so it is used only when
// nothing priced fits or every priced one has failed; among themselves they
// rank by vCPU, memory, name and zone. UnknownPriceExclude never chooses
// them. A negative, NaN or infinite price is treated as unknown.
//
// # Burstable types
//
// A burstable type (BurstableBaselineMilliCPU > 0, the whole instance's
// sustained CPU) under the default policy, BurstableBaseline, fits only a
// pod whose CPU its baseline covers: the pod then never runs out of credits
// and is never throttled. Under BurstableUnlimited it fits any pod its vCPUs
// cover, and when the pod's CPU is above the baseline it ranks at its price
// plus Config.SurplusCreditPricePerVCPUHour (default $0.05, AWS's Linux
// rate) for every vCPU above the baseline, as if the pod used its full
// request all the time; the candidate carries UnlimitedCredits and the host
// must launch it with unlimited credits.
//
// # When nothing fits
//
// PodRequirements and Rank return an *UnsatisfiableError whose message is
// for the pod's event and status as is. The ranking's rules are named
// predicates (rules.go), and Rank's error comes from the same predicates:
// it applies them to the whole catalog one at a time (names, zone,
// architecture, extended resources, GPUs, size, burstable baseline; then
// the offerings' capacity type and zone, availability, price and marks)
// and names the first that leaves nothing: "unknown instance type x1.weird
// (annotation kipcell.io/instance-type)", "no instance type in us-east-1a
// offers 4 GPUs of kind a100", "instance type m5.large (2 vCPU, 8 GiB) is
// too small for the pod (4 vCPU, 2 GiB)". When every rule but the marks
// leaves an offering, the marks are the reason: the ranking found each of
// those offerings marked (a mark may have expired since; the next Rank
// sees it).
//
// # Cost
//
// NewCatalog indexes a catalog once (about 2 ms for 800 types in 6 zones):
// types in (vCPU, memory, name) order with interned architectures and GPU
// kinds, each type's offerings grouped by capacity type, and per capacity
// type the types ordered by their best available offering. Rank visits
// types in that order, checks the fit with a few integer comparisons
// (globs are matched once per pattern and cached), offers each fitting
// type's offerings to a heap of the best MaxCandidates, and stops as soon
// as the heap is full and the next type's best offering ranks after the
// heap's worst (a surcharge only raises a price, so nothing later can
// enter). A named type is visited alone. Prices are compared as the IEEE
// bits of non-negative numbers, so ranking keys are two integers.
//
// Rank allocates only the result; AppendRank into a reused slice
// allocates nothing. The unavailable function is called only for offerings
// that would enter the result; Unavailable.Contains takes no lock and reads
// the clock only for a marked type. Take the method value u.Contains once:
// each evaluation of a method value allocates.
//
// The host keeps one Catalog per plugin catalog and replaces it when
// ListInstanceTypes changes; a Catalog is safe for concurrent use.
package match
