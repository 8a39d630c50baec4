package match

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/pluginapi"
)

// Requirements is what a pod needs from its instance, derived from the pod
// alone (and Config). Each constraint keeps its source, such as
// "annotation kipcell.io/capacity-type", for the messages that explain a
// refusal.
type Requirements struct {
	// MilliCPU and MemoryBytes are what the instance must have: the pod's
	// containers (max of the app containers' sum and the largest init
	// container, sidecars counted as Kubernetes does), or its pod-level
	// resources, plus its overhead, plus the agent reserve.
	MilliCPU    int64
	MemoryBytes int64
	// ReserveMilliCPU and ReserveMemoryBytes are the agent reserve
	// included in MilliCPU and MemoryBytes.
	ReserveMilliCPU    int64
	ReserveMemoryBytes int64

	// GPUCount is the number of GPUs (of GPUResource); zero for none.
	GPUCount int64
	// GPUResource is the extended resource the GPUs were asked as, such
	// as "nvidia.com/gpu".
	GPUResource string
	// GPUKind is the accelerator model ("t4", "a100"), lower case, or
	// empty for any. A kind with no GPU count asks for at least one GPU of
	// that kind.
	GPUKind       string
	GPUKindSource string
	// Extended holds the other extended resources the pod asks for, which
	// no catalog offers (see Config.IgnoredResources); nil for none.
	Extended map[string]int64

	// Arch is the required architecture, or empty for any.
	Arch       pluginapi.Arch
	ArchSource string
	// Zones are the acceptable zones, or empty for any.
	Zones      []string
	ZoneSource string
	// CapacityTypes are the acceptable capacity types in order of
	// preference: every candidate of the first ranks before any of the
	// second. Never empty.
	CapacityTypes      []pluginapi.CapacityType
	CapacityTypeSource string // DefaultCapacityTypeSource when the pod asks for none
	// InstanceTypes are name constraints; an instance type must match all
	// of them.
	InstanceTypes []NamePattern
}

// NamePattern is an instance-type name or a glob (path.Match syntax) over
// names, with where it came from.
type NamePattern struct {
	Pattern string
	Source  string
}

// IsGlob reports whether the pattern has glob metacharacters.
func (p NamePattern) IsGlob() bool { return strings.ContainsAny(p.Pattern, `*?[\`) }

// Bounds beyond which a quantity is refused rather than summed: far above
// any instance, far below int64 overflow.
const (
	maxMilliCPU = 1 << 40 // about a billion cores
	maxBytes    = 1 << 60 // an exbibyte
	maxCount    = 1 << 40
)

// PodRequirements derives a pod's Requirements. Its errors are
// *UnsatisfiableError naming the offending field or annotation.
//
// (The function is not named Requirements, as in the issue, because Go does
// not allow a function and a type of the same name in one package.)
func PodRequirements(pod *corev1.Pod, cfg Config) (Requirements, error) {
	var req Requirements
	if pod == nil {
		return req, unsatisfiable("no pod")
	}
	if err := cfg.Validate(); err != nil {
		return req, fmt.Errorf("match config: %w", err)
	}
	res, err := podResources(pod, !cfg.IgnoreLimits)
	if err != nil {
		return req, err
	}
	req.ReserveMilliCPU, req.ReserveMemoryBytes = int64(cfg.AgentReserveMilliCPU), int64(cfg.AgentReserveMemoryBytes)
	req.MilliCPU = satAdd(res.cpu, req.ReserveMilliCPU)
	req.MemoryBytes = satAdd(res.mem, req.ReserveMemoryBytes)
	if err := req.extended(res.ext, cfg); err != nil {
		return req, err
	}

	ann, sel := pod.Annotations, pod.Spec.NodeSelector

	// GPU kind.
	var kinds []sourced
	kinds = appendSourced(kinds, ann, AnnotationGPUKind, "annotation", normaliseGPUKind)
	kinds = appendSourced(kinds, sel, LabelGPUKind, "nodeSelector", normaliseGPUKind)
	kinds = appendSourced(kinds, sel, LabelGKEAccelerator, "nodeSelector", normaliseGPUKind)
	for _, k := range sortedKeys(sel) {
		if kind, ok := strings.CutPrefix(k, LabelElotlGPUPrefix); ok && kind != "" {
			kinds = append(kinds, sourced{normaliseGPUKind(kind), "nodeSelector " + k})
		}
	}
	kind, err := agree("GPU kind", kinds)
	if err != nil {
		return req, err
	}
	req.GPUKind, req.GPUKindSource = kind.value, kind.source

	// Architecture and zone.
	var archs, zones []sourced
	archs = appendSourced(archs, sel, corev1.LabelArchStable, "nodeSelector", strings.ToLower)
	archs = appendSourced(archs, sel, "beta.kubernetes.io/arch", "nodeSelector", strings.ToLower)
	arch, err := agree("architecture", archs)
	if err != nil {
		return req, err
	}
	req.Arch, req.ArchSource = pluginapi.Arch(arch.value), arch.source
	if req.Arch == "" && cfg.DefaultArch != "" {
		req.Arch, req.ArchSource = cfg.DefaultArch, "the default architecture"
	}
	zones = appendSourced(zones, sel, corev1.LabelTopologyZone, "nodeSelector", nil)
	zones = appendSourced(zones, sel, corev1.LabelFailureDomainBetaZone, "nodeSelector", nil)
	zone, err := agree("zone", zones)
	if err != nil {
		return req, err
	}
	if zone.value != "" {
		req.Zones, req.ZoneSource = []string{zone.value}, zone.source
	}

	// Capacity type.
	if err := req.capacityTypes(ann, sel, cfg); err != nil {
		return req, err
	}

	// Instance-type names.
	for _, s := range []struct {
		m         map[string]string
		key, kind string
	}{
		{ann, AnnotationInstanceType, "annotation"},
		{ann, AnnotationElotlInstanceType, "annotation"},
		{sel, corev1.LabelInstanceTypeStable, "nodeSelector"},
		{sel, corev1.LabelInstanceType, "nodeSelector"},
	} {
		v := strings.TrimSpace(s.m[s.key])
		if v == "" {
			continue
		}
		src := s.kind + " " + s.key
		if _, err := path.Match(v, ""); err != nil {
			return req, unsatisfiable(fmt.Sprintf("%s: %q is not an instance type or a valid glob: %v", src, v, err))
		}
		if !slices.ContainsFunc(req.InstanceTypes, func(p NamePattern) bool { return p.Pattern == v }) {
			req.InstanceTypes = append(req.InstanceTypes, NamePattern{Pattern: v, Source: src})
		}
	}
	return req, nil
}

// DefaultCapacityTypeSource is Requirements.CapacityTypeSource of a pod
// that asks for no capacity type: it gets Config.DefaultCapacityType.
const DefaultCapacityTypeSource = "config defaultCapacityType"

// CapacityTypeChosen reports whether the pod asked for its capacity type
// (an annotation or a node selector) rather than getting the default.
func (req Requirements) CapacityTypeChosen() bool {
	return req.CapacityTypeSource != DefaultCapacityTypeSource
}

func (req *Requirements) extended(ext map[string]int64, cfg Config) error {
	for _, name := range sortedKeys(ext) {
		n := ext[name]
		switch {
		case n == 0 || slices.Contains(cfg.IgnoredResources, name):
		case slices.Contains(cfg.gpuResources(), name):
			if req.GPUResource != "" {
				return unsatisfiable(fmt.Sprintf("the pod asks for both %s and %s; an instance has one kind of GPU", req.GPUResource, name))
			}
			req.GPUResource, req.GPUCount = name, n
		default:
			if req.Extended == nil {
				req.Extended = make(map[string]int64)
			}
			req.Extended[name] = n
		}
	}
	return nil
}

func (req *Requirements) capacityTypes(ann, sel map[string]string, cfg Config) error {
	var cts []sourced
	parse := func(src, v string) error {
		switch v {
		case string(pluginapi.CapacitySpot), string(pluginapi.CapacityOnDemand):
			cts = append(cts, sourced{v, src})
			return nil
		}
		return unsatisfiable(fmt.Sprintf("%s: %q is not a capacity type: want %q or %q", src, v, pluginapi.CapacitySpot, pluginapi.CapacityOnDemand))
	}
	for _, s := range []struct {
		m         map[string]string
		key, kind string
	}{
		{ann, AnnotationCapacityType, "annotation"},
		{sel, LabelCapacityType, "nodeSelector"},
		{sel, LabelKarpenterCapacityType, "nodeSelector"},
	} {
		if v := strings.ToLower(strings.TrimSpace(s.m[s.key])); v != "" {
			if err := parse(s.kind+" "+s.key, v); err != nil {
				return err
			}
		}
	}
	if v := strings.ToLower(strings.TrimSpace(ann[AnnotationElotlLaunchType])); v != "" {
		src := "annotation " + AnnotationElotlLaunchType
		if v == "dedicated" {
			return unsatisfiable(fmt.Sprintf("%s: dedicated tenancy is not supported", src))
		}
		if err := parse(src, v); err != nil {
			return err
		}
	}
	ct, err := agree("capacity type", cts)
	if err != nil {
		return err
	}
	if ct.value == "" {
		ct = sourced{string(cfg.defaultCapacityType()), DefaultCapacityTypeSource}
	}
	req.CapacityTypes, req.CapacityTypeSource = []pluginapi.CapacityType{pluginapi.CapacityType(ct.value)}, ct.source
	fallback := cfg.SpotFallback
	if v := strings.TrimSpace(ann[AnnotationSpotFallback]); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return unsatisfiable(fmt.Sprintf("annotation %s: %q is not true or false", AnnotationSpotFallback, v))
		}
		fallback = b
	}
	if ct.value == string(pluginapi.CapacitySpot) && fallback {
		req.CapacityTypes = append(req.CapacityTypes, pluginapi.CapacityOnDemand)
	}
	return nil
}

// sourced is one value of a constraint and where it came from.
type sourced struct{ value, source string }

func appendSourced(dst []sourced, m map[string]string, key, kind string, norm func(string) string) []sourced {
	v := strings.TrimSpace(m[key])
	if v == "" {
		return dst
	}
	if norm != nil {
		v = norm(v)
	}
	return append(dst, sourced{v, kind + " " + key})
}

// agree returns the value all sources give, or an error naming two that
// differ; the zero sourced when there are none.
func agree(what string, vals []sourced) (sourced, error) {
	if len(vals) == 0 {
		return sourced{}, nil
	}
	for _, v := range vals[1:] {
		if v.value != vals[0].value {
			return sourced{}, unsatisfiable(fmt.Sprintf("conflicting %s: %s says %q, %s says %q", what, vals[0].source, vals[0].value, v.source, v.value))
		}
	}
	return vals[0], nil
}

// normaliseGPUKind lower-cases a kind and drops a vendor prefix, so that
// GKE's "nvidia-tesla-t4" and Elotl's "nvidia-tesla-t4" match a catalog
// kind "t4".
func normaliseGPUKind(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"nvidia-tesla-", "nvidia-", "amd-"} {
		if t, ok := strings.CutPrefix(s, p); ok && t != "" {
			return t
		}
	}
	return s
}

// resources is an amount of CPU (milli), memory (bytes) and extended
// resources (count).
type resources struct {
	cpu, mem int64
	ext      map[string]int64
}

func (r *resources) add(o resources) {
	r.cpu, r.mem = satAdd(r.cpu, o.cpu), satAdd(r.mem, o.mem)
	for k, v := range o.ext {
		r.setExt(k, satAdd(r.ext[k], v))
	}
}

func (r *resources) max(o resources) {
	r.cpu, r.mem = max(r.cpu, o.cpu), max(r.mem, o.mem)
	for k, v := range o.ext {
		if v > r.ext[k] {
			r.setExt(k, v)
		}
	}
}

func (r *resources) setExt(k string, v int64) {
	if r.ext == nil {
		r.ext = make(map[string]int64)
	}
	r.ext[k] = v
}

// podResources computes what the pod needs the way the scheduler does
// (k8s.io/component-helpers resource.PodRequests): the sum of the app
// containers and restartable (sidecar) init containers, or, if larger,
// each ordinary init container plus the sidecars started before it; then
// pod-level resources when set; then the pod overhead.
func podResources(pod *corev1.Pod, useLimits bool) (resources, error) {
	var sum resources
	for i := range pod.Spec.Containers {
		c, err := containerResources("container", pod.Spec.Containers[i].Name, pod.Spec.Containers[i].Resources, useLimits)
		if err != nil {
			return sum, err
		}
		sum.add(c)
	}
	var sidecars, initMax resources
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		c, err := containerResources("init container", ic.Name, ic.Resources, useLimits)
		if err != nil {
			return sum, err
		}
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.add(c)
			sidecars.add(c)
			initMax.max(sidecars)
			continue
		}
		c.add(sidecars)
		initMax.max(c)
	}
	sum.max(initMax)
	if pod.Spec.Resources != nil {
		p, err := containerResources("pod", "resources", *pod.Spec.Resources, useLimits)
		if err != nil {
			return sum, err
		}
		// Pod-level resources are the pod's budget, shared by its
		// containers; they cover the containers' own.
		if _, ok := pick(*pod.Spec.Resources, corev1.ResourceCPU, useLimits); ok {
			sum.cpu = max(sum.cpu, p.cpu)
		}
		if _, ok := pick(*pod.Spec.Resources, corev1.ResourceMemory, useLimits); ok {
			sum.mem = max(sum.mem, p.mem)
		}
	}
	if len(pod.Spec.Overhead) > 0 {
		o, err := listResources("pod overhead", "", pod.Spec.Overhead, nil)
		if err != nil {
			return sum, err
		}
		o.ext = nil
		sum.add(o)
	}
	return sum, nil
}

// pick returns the request of name, or its limit when there is no request
// and limits may stand in.
func pick(r corev1.ResourceRequirements, name corev1.ResourceName, useLimits bool) (resource.Quantity, bool) {
	if q, ok := r.Requests[name]; ok {
		return q, true
	}
	if useLimits {
		q, ok := r.Limits[name]
		return q, ok
	}
	return resource.Quantity{}, false
}

func containerResources(kind, name string, r corev1.ResourceRequirements, useLimits bool) (resources, error) {
	var out resources
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := pick(r, n, useLimits); ok {
			v, err := quantity(kind, name, n, q)
			if err != nil {
				return out, err
			}
			if n == corev1.ResourceCPU {
				out.cpu = v
			} else {
				out.mem = v
			}
		}
	}
	// Extended resources cannot be overcommitted: the request equals the
	// limit, and a missing request defaults to the limit.
	ext, err := listResources(kind, name, r.Limits, nil)
	if err != nil {
		return out, err
	}
	ext, err = listResources(kind, name, r.Requests, ext.ext)
	if err != nil {
		return out, err
	}
	out.ext = ext.ext
	return out, nil
}

// listResources reads the cpu, memory and extended resources of l into a
// resources, its extended ones into ext (which it may allocate).
func listResources(kind, name string, l corev1.ResourceList, ext map[string]int64) (resources, error) {
	out := resources{ext: ext}
	for n, q := range l {
		if n != corev1.ResourceCPU && n != corev1.ResourceMemory && !isExtended(n) {
			continue
		}
		v, err := quantity(kind, name, n, q)
		if err != nil {
			return out, err
		}
		switch n {
		case corev1.ResourceCPU:
			out.cpu = v
		case corev1.ResourceMemory:
			out.mem = v
		default:
			out.setExt(string(n), v)
		}
	}
	return out, nil
}

// isExtended reports whether n is an extended resource: a domain-prefixed
// name outside kubernetes.io, and not a quota-style "requests." name.
func isExtended(n corev1.ResourceName) bool {
	s := string(n)
	if !strings.Contains(s, "/") || strings.HasPrefix(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, "requests.") {
		return false
	}
	return !strings.Contains(strings.SplitN(s, "/", 2)[0], "kubernetes.io")
}

// quantity converts q to millicores (cpu), bytes (memory) or a count,
// refusing negative and absurdly large values.
func quantity(kind, name string, n corev1.ResourceName, q resource.Quantity) (int64, error) {
	what := func() string { // only for an error: formatting costs more than the check
		if name == "" {
			return kind
		}
		return fmt.Sprintf("%s %q", kind, name)
	}
	if q.Sign() < 0 {
		return 0, unsatisfiable(fmt.Sprintf("%s asks for %s %s: a negative quantity", what(), n, q.String()))
	}
	// Compare as a float: Quantity.Cmp takes seconds for an exponent such
	// as 1e44444422 (it builds the whole number), and MilliValue
	// overflows silently. The bounds are far below int64's range, so the
	// float's rounding near them cannot let an overflow through.
	limit, scale := float64(maxCount), 1.0
	switch n {
	case corev1.ResourceCPU:
		limit, scale = float64(maxMilliCPU), 1000
	case corev1.ResourceMemory:
		limit = float64(maxBytes)
	}
	if q.AsApproximateFloat64()*scale > limit {
		return 0, unsatisfiable(fmt.Sprintf("%s asks for %s %s, more than any instance offers", what(), n, q.String()))
	}
	if scale == 1000 {
		return q.MilliValue(), nil
	}
	return q.Value(), nil
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ConstrainZones narrows the acceptable zones to those of a further
// constraint (a persistent volume's zones, the Kip node's zone), source
// naming it for the explanations. Empty zones constrain nothing. When the
// pod already asks for zones, only those of both are left; none left is
// an *UnsatisfiableError naming both sources.
func (req Requirements) ConstrainZones(zones []string, source string) (Requirements, error) {
	if len(zones) == 0 {
		return req, nil
	}
	if len(req.Zones) == 0 {
		req.Zones, req.ZoneSource = slices.Clone(zones), source
		return req, nil
	}
	var both []string
	for _, z := range req.Zones {
		if slices.Contains(zones, z) {
			both = append(both, z)
		}
	}
	if len(both) == 0 {
		return req, unsatisfiable(fmt.Sprintf("no zone satisfies both %s (%s) and %s (%s)",
			req.ZoneSource, strings.Join(req.Zones, " or "), source, strings.Join(zones, " or ")))
	}
	req.Zones, req.ZoneSource = both, req.ZoneSource+" and "+source
	return req, nil
}
