package match

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/pluginapi"
)

// fuzzCatalog is shared by every fuzz input: the fixture catalog.
var fuzzCatalog = NewCatalog(fixtureCatalog())

// parseKV reads "k=v" pairs separated by newlines or semicolons.
func parseKV(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ';' }) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// exponentOverflows reports a quantity apimachinery's ParseQuantity itself
// takes unbounded time on: an exponent of more than nine digits (inf.Dec's
// int32 scale overflows and its rounding never ends) or a negative one of
// more than five (1e-99999999 takes about a minute). Neither the API
// server nor kip ever holds such a Quantity; kip's own code must stay fast
// on the large exponents ParseQuantity does return (see the huge-exponent
// seed).
func exponentOverflows(s string) bool {
	i := strings.LastIndexAny(s, "eE")
	if i < 0 {
		return false
	}
	exp := s[i+1:]
	digits := strings.TrimLeft(exp, "+-")
	return len(digits) > 9 || (strings.HasPrefix(exp, "-") && len(digits) > 5)
}

// parseResources reads "name=quantity" pairs, skipping quantities that do
// not parse (the API server would refuse them).
func parseResources(s string) corev1.ResourceList {
	var l corev1.ResourceList
	for k, v := range parseKV(s) {
		if exponentOverflows(v) {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			continue
		}
		if l == nil {
			l = corev1.ResourceList{}
		}
		l[corev1.ResourceName(k)] = q
	}
	return l
}

// FuzzRequirementsAndRank builds a pod from fuzz strings (requests and
// limits of an app container, an init container and a sidecar;
// annotations; node selectors) and a config and unavailable marks from
// flags, and checks that PodRequirements and Rank never panic, refuse only
// with an UnsatisfiableError with a reason, rank like the reference, and,
// when nothing fits, name the rule the reference finds leaves nothing.
func FuzzRequirementsAndRank(f *testing.F) {
	type seed struct {
		appReq, appLim, initReq, initLim, sidecarReq, annotations, selectors string
		flags                                                                uint8
	}
	for _, s := range []seed{
		{"cpu=1;memory=1Gi", "", "cpu=2;memory=3Gi", "", "", "", "", uint8(0)},
		{"cpu=500m", "memory=512Mi", "", "", "", "kipcell.io/capacity-type=spot;kipcell.io/spot-fallback=true", "", uint8(1)},
		{"cpu=1", "nvidia.com/gpu=4", "", "", "", "kipcell.io/gpu-kind=a100", "topology.kubernetes.io/zone=us-east-1a", uint8(0)},
		{"cpu=4;memory=2Gi", "", "", "", "", "kipcell.io/instance-type=m5.large", "", uint8(2)},
		{"cpu=1", "", "", "", "", "kipcell.io/instance-type=c5.*", "kubernetes.io/arch=arm64", uint8(0)},
		{"cpu=1;memory=1Gi", "", "", "", "", "pod.elotl.co/launch-type=dedicated", "", uint8(0)},
		{"cpu=1", "", "", "", "", "kipcell.io/capacity-type=preemptible", "", uint8(0)},
		{"cpu=1900m;memory=3Gi", "", "", "", "", "", "", uint8(4)},
		{"", "cpu=3;memory=12Gi", "", "", "", "kipcell.io/capacity-type=spot", "topology.kubernetes.io/zone=us-east-1b", uint8(8)},
		{"example.com/fpga=1", "", "", "", "cpu=250m;memory=64Mi", "", "cloud.google.com/gke-accelerator=nvidia-tesla-t4", uint8(16)},
		{"cpu=-1", "", "", "", "", "", "", uint8(0)},
		{"memory=1e30", "", "", "", "", "", "", uint8(0)},
		{"cpu=1", "", "", "", "", "kipcell.io/instance-type=[", "node.kubernetes.io/instance-type=m5.large", uint8(0)},
	} {
		f.Add(s.appReq, s.appLim, s.initReq, s.initLim, s.sidecarReq, s.annotations, s.selectors, s.flags)
	}
	f.Fuzz(func(t *testing.T, appReq, appLim, initReq, initLim, sidecarReq, annotations, selectors string, flags uint8) {
		always := corev1.ContainerRestartPolicyAlways
		pod := &corev1.Pod{Spec: corev1.PodSpec{
			Containers:     []corev1.Container{ctr("app", parseResources(appReq), parseResources(appLim))},
			InitContainers: []corev1.Container{ctr("init", parseResources(initReq), parseResources(initLim))},
			NodeSelector:   parseKV(selectors),
		}}
		pod.Annotations = parseKV(annotations)
		if sr := parseResources(sidecarReq); sr != nil {
			side := ctr("sidecar", sr, nil)
			side.RestartPolicy = &always
			pod.Spec.InitContainers = append([]corev1.Container{side}, pod.Spec.InitContainers...)
		}
		cfg := Config{
			IgnoreLimits:     flags&1 != 0,
			IgnoredResources: []string{"example.com/fpga"},
			MaxCandidates:    []int{0, 3}[flags>>5&1],
		}
		if flags&2 != 0 {
			cfg = DefaultConfig()
		}
		if flags&4 != 0 {
			cfg.BurstablePolicy = BurstableUnlimited
		}
		if flags&8 != 0 {
			cfg.UnknownPrice = UnknownPriceExclude
		}
		if flags&16 != 0 {
			cfg.DefaultCapacityType, cfg.SpotFallback = pluginapi.CapacitySpot, true
		}
		req, err := PodRequirements(pod, cfg)
		if err != nil {
			if !IsUnsatisfiable(err) || err.Error() == "" || ruleOf(err) != ruleNone {
				t.Fatalf("PodRequirements: %v (%T), want an UnsatisfiableError with a reason and no catalog rule", err, err)
			}
			return
		}
		if req.MilliCPU < 0 || req.MemoryBytes < 0 || req.GPUCount < 0 || len(req.CapacityTypes) == 0 {
			t.Fatalf("bad requirements %+v", req)
		}
		var unavailable func(string, string, pluginapi.CapacityType) bool
		if flags&64 != 0 {
			unavailable = func(typ, zone string, _ pluginapi.CapacityType) bool {
				return zone == zA && strings.HasPrefix(typ, "c")
			}
		}
		rankUnavailable := unavailable // what Rank gets; the reference gets unavailable
		if flags&128 != 0 {
			rankUnavailable = expiringMarks(unavailable)
			unavailable = func(string, string, pluginapi.CapacityType) bool { return true }
		}
		got, err := fuzzCatalog.Rank(req, rankUnavailable, cfg)
		if err != nil {
			if !IsUnsatisfiable(err) || err.Error() == "" {
				t.Fatalf("Rank: %v (%T), want an UnsatisfiableError with a reason", err, err)
			}
			if len(got) != 0 {
				t.Fatalf("Rank returned %d candidates and an error", len(got))
			}
		}
		// Nothing fits exactly when the reference names a rule, and the
		// reason is that rule.
		if r, want := ruleOf(err), naiveExplain(req, fixtureCatalog(), unavailable, cfg); r != want {
			t.Fatalf("Rank refused for rule %v (%v), the reference finds rule %v leaves nothing", r, err, want)
		}
		want := naiveRank(req, fixtureCatalog(), unavailable, cfg)
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("Rank differs from the reference (-ref +got):\n%s", d)
		}
		for _, c := range got {
			if !slices.Contains(req.CapacityTypes, c.CapacityType) || c.MilliCPU < req.MilliCPU || c.MemoryBytes < req.MemoryBytes {
				t.Fatalf("candidate %+v does not fit %+v", c, req)
			}
		}
	})
}

// expiringMarks is an unavailable function whose marks expire as soon as
// they are read: it says every offering is marked the first time it is
// asked about it, and then what next says, as the host's Unavailable does
// when a mark's TTL ends between Rank's look and explain's.
func expiringMarks(next func(string, string, pluginapi.CapacityType) bool) func(string, string, pluginapi.CapacityType) bool {
	asked := map[string]bool{}
	return func(typ, zone string, ct pluginapi.CapacityType) bool {
		k := typ + "/" + zone + "/" + string(ct)
		if !asked[k] {
			asked[k] = true
			return true
		}
		return next != nil && next(typ, zone, ct)
	}
}
