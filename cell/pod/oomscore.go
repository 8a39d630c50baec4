package pod

import (
	corev1 "k8s.io/api/core/v1"
)

// The OOM score adjustments of the kubelet (pkg/kubelet/qos/policy.go,
// Kubernetes v1.36): the kernel's OOM killer picks the process with the
// highest score, its share of memory in thousandths plus the adjustment,
// so a BestEffort container goes first, a Burstable one by how little
// memory it asked for, a Guaranteed one last; the cell's agent (kip-cell's
// --oom-score-adj, -998) after all of them.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
	// systemCriticalPriority is scheduling.SystemCriticalPriority: pods
	// at or above it are critical.
	systemCriticalPriority = 2_000_000_000
)

// containerOOMScoreAdj is the OOM score adjustment of container c of pod
// p on a cell of memoryCapacity bytes: the kubelet's
// GetContainerOOMScoreAdjust with pod-level resources enabled (their
// default since v1.34). 0 (the runtime's) for a Burstable container when
// the capacity is unknown.
func containerOOMScoreAdj(p *corev1.Pod, c *corev1.Container, memoryCapacity int64) int {
	if isNodeCriticalPod(p) {
		return guaranteedOOMScoreAdj
	}
	switch qosClass(p) {
	case corev1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case corev1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return 0
	}
	remaining := remainingPodMemReqPerContainer(p)
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+remaining)/memoryCapacity
	// A sidecar (a restartable init container) is killed no earlier than
	// the regular container that asked for least.
	if isSidecar(p, c) {
		if least := 1000 - 1000*(minRegularContainerMemory(p)+remaining)/memoryCapacity; adj > least {
			adj = least
		}
	}
	switch {
	case adj < 1000+guaranteedOOMScoreAdj:
		// A Guaranteed pod using all the memory scores 3 (-997 + 1000):
		// a Burstable one scores more.
		return 1000 + guaranteedOOMScoreAdj
	case adj == besteffortOOMScoreAdj:
		return besteffortOOMScoreAdj - 1
	}
	return int(adj)
}

// podMemoryLimit is the memory limit of pod p as a whole, as the kubelet
// gives its pod cgroup (ResourceConfigForPod, component-helpers'
// PodLimits): its pod-level limit; else, when every container has one,
// the regular containers' and sidecars' together or an init container's
// with the sidecars started before it, whichever is more, plus the pod's
// overhead; else 0, none.
func podMemoryLimit(p *corev1.Pod) int64 {
	if p.Spec.Resources != nil {
		if q, ok := p.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.Value()
		}
	}
	var sidecars, inits int64
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		q, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0
		}
		if isSidecar(p, c) {
			sidecars += q.Value()
			continue
		}
		inits = max(inits, sidecars+q.Value())
	}
	regular := sidecars
	for i := range p.Spec.Containers {
		q, ok := p.Spec.Containers[i].Resources.Limits[corev1.ResourceMemory]
		if !ok {
			return 0
		}
		regular += q.Value()
	}
	return max(regular, inits) + p.Spec.Overhead.Memory().Value()
}

// isNodeCriticalPod is the kubelet's types.IsNodeCriticalPod for a pod
// sent to a cell (never static nor mirror): system-node-critical.
func isNodeCriticalPod(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical" &&
		p.Spec.Priority != nil && *p.Spec.Priority >= systemCriticalPriority
}

// isSidecar says whether c is one of p's restartable init containers.
func isSidecar(p *corev1.Pod, c *corev1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularContainerMemory is the lowest memory request of p's regular
// containers (0 when there are none).
func minRegularContainerMemory(p *corev1.Pod) int64 {
	least := int64(-1)
	for i := range p.Spec.Containers {
		if r := p.Spec.Containers[i].Resources.Requests.Memory().Value(); least < 0 || r < least {
			least = r
		}
	}
	return max(least, 0)
}

// remainingPodMemReqPerContainer is the share of each container (init
// containers counted) in what the pod-level memory request leaves of its
// containers' aggregated requests: the kubelet's formula for pod-level
// resources; 0 without a pod-level request.
func remainingPodMemReqPerContainer(p *corev1.Pod) int64 {
	if p.Spec.Resources == nil || p.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	// The aggregate (component-helpers' AggregateContainerRequests): the
	// regular containers and sidecars together, or an init container with
	// the sidecars started before it, whichever is more.
	var sidecars, aggregate int64
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		r := c.Resources.Requests.Memory().Value()
		if isSidecar(p, c) {
			sidecars += r
			continue
		}
		aggregate = max(aggregate, sidecars+r)
	}
	regular := sidecars
	for i := range p.Spec.Containers {
		regular += p.Spec.Containers[i].Resources.Requests.Memory().Value()
	}
	aggregate = max(aggregate, regular)
	return (p.Spec.Resources.Requests.Memory().Value() - aggregate) / int64(len(p.Spec.Containers)+len(p.Spec.InitContainers))
}
