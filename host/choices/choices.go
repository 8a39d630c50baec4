package choices

import (
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/setting"
	"github.com/kipcell/kip/pluginapi"
)

// ReasonChoiceForbidden is the status reason and event reason of a pod
// whose choices a rule refuses: it stays Pending, and no cell is launched.
const ReasonChoiceForbidden = "ChoiceForbidden"

// Config is the cells.choices section of kip.yaml:
//
//	cells:
//	  choices:
//	    rules:
//	      - name: ml
//	        namespaces: [ml, "ml-*"]
//	        serviceAccounts: [trainer]
//	        instanceTypes: ["g5.*", "p4d.*"]
//	        capacityTypes: [spot, on-demand]
//	        gpuKinds: [a10g, a100]
//	        instanceProfiles: [ml-training]
//	        maxVolumeSize: 500Gi
//	        maxPriceRatio: 4
//	      - name: everyone
//	        instanceTypes: ["*"]
//	        capacityTypes: [spot]
//	        maxPriceRatio: 2
type Config struct {
	// Rules are tried in order; the first that matches a pod decides.
	// None (the default): a pod may choose anything the plugin offers.
	Rules []Rule `koanf:"rules"`
}

// Rule is what the pods of some namespaces (and ServiceAccounts) may
// choose. A list left empty allows nothing of its kind; "*" anything.
type Rule struct {
	// Name names the rule in events: a DNS label, unique.
	Name string `koanf:"name"`
	// Namespaces are glob patterns (path.Match: *, ?, [a-z]) of the
	// namespaces the rule is for; empty: every namespace.
	Namespaces []string `koanf:"namespaces"`
	// ServiceAccounts are the names of the ServiceAccounts (in those
	// namespaces) whose pods the rule is for; empty: every one.
	ServiceAccounts []string `koanf:"serviceAccounts"`
	// InstanceTypes are glob patterns of the instance types a pod may
	// name (kipcell.io/instance-type, pod.elotl.co/instance-type, the
	// node.kubernetes.io/instance-type node selector); a pod that names
	// a pattern gets an instance type that matches both.
	InstanceTypes []string `koanf:"instanceTypes"`
	// CapacityTypes are the capacity types a pod may ask for by
	// annotation or node selector (spot, on-demand); one that asks for
	// none gets match.defaultCapacityType, which is not a choice.
	CapacityTypes []string `koanf:"capacityTypes"`
	// GPUKinds are glob patterns of the GPU models a pod may name
	// (kipcell.io/gpu-kind and the GPU node selectors).
	GPUKinds []string `koanf:"gpuKinds"`
	// InstanceProfiles are glob patterns of the instance profiles a pod
	// may name (kipcell.io/instance-profile), within those the plugin
	// allows.
	InstanceProfiles []string `koanf:"instanceProfiles"`
	// SecurityGroups are glob patterns of the security groups a pod may
	// add (kipcell.io/security-groups), within those the plugin allows.
	SecurityGroups []string `koanf:"securityGroups"`
	// MaxVolumeSize is the largest root volume a pod may ask for
	// (kipcell.io/volume-size), a quantity such as 100Gi; empty: a pod
	// may not ask.
	MaxVolumeSize string `koanf:"maxVolumeSize"`
	// MaxPriceRatio bounds what a pod that names an instance type may
	// cost: its cell's hourly price at most this many times that of the
	// cheapest instance type that fits its requests (vCPUs and memory,
	// where the catalog lacks either price). 0: no ceiling; else at
	// least 1.
	MaxPriceRatio float64 `koanf:"maxPriceRatio"`
}

var ruleNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate checks the section, naming each bad key under prefix
// ("choices").
func (c Config) Validate(prefix string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, r := range c.Rules {
		key := func(k string) string { return fmt.Sprintf("%s.rules[%d].%s", prefix, i, k) }
		switch {
		case r.Name == "":
			errs = append(errs, setting.Errorf(key("name"), "is empty: every rule has a name, which the events of the pods it refuses say"))
		case len(r.Name) > 63 || !ruleNameRE.MatchString(r.Name):
			errs = append(errs, setting.Errorf(key("name"), "%q is not a DNS label", r.Name))
		case seen[r.Name]:
			errs = append(errs, setting.Errorf(key("name"), "%q names two rules", r.Name))
		}
		seen[r.Name] = true
		for _, l := range []struct {
			k    string
			pats []string
		}{
			{"namespaces", r.Namespaces}, {"instanceTypes", r.InstanceTypes}, {"gpuKinds", r.GPUKinds},
			{"instanceProfiles", r.InstanceProfiles}, {"securityGroups", r.SecurityGroups},
		} {
			for _, p := range l.pats {
				if _, err := path.Match(p, ""); err != nil || p == "" {
					errs = append(errs, setting.Errorf(key(l.k), "%q is not a glob pattern (*, ?, [a-z])", p))
				}
			}
		}
		for _, ct := range r.CapacityTypes {
			if ct != "*" && ct != string(pluginapi.CapacitySpot) && ct != string(pluginapi.CapacityOnDemand) {
				errs = append(errs, setting.Errorf(key("capacityTypes"), "%q is neither %s nor %s", ct, pluginapi.CapacitySpot, pluginapi.CapacityOnDemand))
			}
		}
		if r.MaxVolumeSize != "" {
			if q, err := resource.ParseQuantity(r.MaxVolumeSize); err != nil || q.Sign() <= 0 {
				errs = append(errs, setting.Errorf(key("maxVolumeSize"), "%q is not a positive size such as 100Gi", r.MaxVolumeSize))
			}
		}
		if r.MaxPriceRatio != 0 && (r.MaxPriceRatio < 1 || math.IsNaN(r.MaxPriceRatio) || math.IsInf(r.MaxPriceRatio, 0)) {
			errs = append(errs, setting.Errorf(key("maxPriceRatio"), "%v is neither 0 (no ceiling) nor a ratio of at least 1", r.MaxPriceRatio))
		}
	}
	return errs
}

// Pod is what a pod chooses about its instance, and whose pod it is.
type Pod struct {
	Namespace string
	// ServiceAccount is spec.serviceAccountName ("" is "default").
	ServiceAccount string
	// InstanceTypes are the instance-type patterns the pod names
	// (match.Requirements.InstanceTypes).
	InstanceTypes []match.NamePattern
	// CapacityType is the capacity type the pod asks for, and where;
	// empty when it asks for none (match.Requirements.CapacityTypeChosen).
	CapacityType, CapacityTypeSource string
	// GPUKind is the GPU model the pod names, and where; empty: none.
	GPUKind, GPUKindSource string
	// InstanceProfile, SecurityGroups and VolumeSizeGiB are the launch
	// annotations' (zero: not asked for).
	InstanceProfile string
	SecurityGroups  []string
	VolumeSizeGiB   int32
}

// serviceAccount is the pod's ServiceAccount, "default" when unset.
func (p Pod) serviceAccount() string {
	if p.ServiceAccount == "" {
		return "default"
	}
	return p.ServiceAccount
}

// ForbiddenError is a choice a rule refuses.
type ForbiddenError struct {
	// Rule is the rule's name; empty when no rule matches the pod.
	Rule string
	// Message says what the pod asked for, where, and what the rule
	// allows.
	Message string
}

func (e *ForbiddenError) Error() string { return e.Message }

// IsForbidden reports whether err is, or wraps, a *ForbiddenError.
func IsForbidden(err error) bool {
	var f *ForbiddenError
	return errors.As(err, &f)
}

// rule returns the rule for p, and false when there are no rules.
func (c Config) rule(p Pod) (Rule, bool) {
	if len(c.Rules) == 0 {
		return Rule{}, false
	}
	sa := p.serviceAccount()
	for _, r := range c.Rules {
		if (len(r.Namespaces) == 0 || matchesAny(r.Namespaces, p.Namespace)) &&
			(len(r.ServiceAccounts) == 0 || slices.Contains(r.ServiceAccounts, sa)) {
			return r, true
		}
	}
	return Rule{}, true // no rule matches: nothing may be chosen
}

func matchesAny(patterns []string, v string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := path.Match(p, v)
		return ok
	})
}

// forbid builds the error for a choice of p that r refuses: what (the
// pod's value and where it is), the rule's key and what it allows.
func forbid(r Rule, p Pod, what, key string, allowed []string) error {
	who := fmt.Sprintf("namespace %q", p.Namespace)
	if len(r.ServiceAccounts) > 0 {
		who += fmt.Sprintf(", ServiceAccount %q", p.serviceAccount())
	}
	if r.Name == "" {
		return &ForbiddenError{Message: fmt.Sprintf("%s: no rule of kip's cells.choices is for %s, so its pods may choose nothing about their instance", what, who)}
	}
	may := "allows none"
	if len(allowed) > 0 {
		may = "allows " + strings.Join(allowed, ", ")
	}
	return &ForbiddenError{Rule: r.Name, Message: fmt.Sprintf("%s: rule %q of kip's cells.choices (for %s) %s (%s)", what, r.Name, who, may, key)}
}

// Check refuses the choices of p that its rule does not allow; instance
// types are Bound's. nil when there are no rules.
func (c Config) Check(p Pod) error {
	r, bounded := c.rule(p)
	if !bounded {
		return nil
	}
	if len(p.InstanceTypes) > 0 && len(r.InstanceTypes) == 0 {
		it := p.InstanceTypes[0]
		return forbid(r, p, fmt.Sprintf("%s asks for instance type %q", it.Source, it.Pattern), "instanceTypes", nil)
	}
	if p.CapacityType != "" && !slices.Contains(r.CapacityTypes, "*") && !slices.Contains(r.CapacityTypes, p.CapacityType) {
		return forbid(r, p, fmt.Sprintf("%s asks for capacity type %s", p.CapacityTypeSource, p.CapacityType), "capacityTypes", r.CapacityTypes)
	}
	if p.GPUKind != "" && !matchesAny(r.GPUKinds, p.GPUKind) {
		return forbid(r, p, fmt.Sprintf("%s asks for GPU kind %q", p.GPUKindSource, p.GPUKind), "gpuKinds", r.GPUKinds)
	}
	if p.InstanceProfile != "" && !matchesAny(r.InstanceProfiles, p.InstanceProfile) {
		return forbid(r, p, fmt.Sprintf("annotation kipcell.io/instance-profile asks for instance profile %q", p.InstanceProfile), "instanceProfiles", r.InstanceProfiles)
	}
	for _, g := range p.SecurityGroups {
		if !matchesAny(r.SecurityGroups, g) {
			return forbid(r, p, fmt.Sprintf("annotation kipcell.io/security-groups adds security group %q", g), "securityGroups", r.SecurityGroups)
		}
	}
	if p.VolumeSizeGiB > 0 {
		what := fmt.Sprintf("annotation kipcell.io/volume-size asks for a root volume of %dGi", p.VolumeSizeGiB)
		if r.MaxVolumeSize == "" {
			return forbid(r, p, what, "maxVolumeSize", nil)
		}
		limit, _ := resource.ParseQuantity(r.MaxVolumeSize) // Validate parsed it
		if int64(p.VolumeSizeGiB)<<30 > limit.Value() {
			return forbid(r, p, what, "maxVolumeSize", []string{"at most " + r.MaxVolumeSize})
		}
	}
	return nil
}

// Ceiling is the MaxPriceRatio Bound applies to p's candidates: its
// rule's, when p names an instance type; 0 otherwise.
func (c Config) Ceiling(p Pod) float64 {
	r, bounded := c.rule(p)
	if !bounded || len(p.InstanceTypes) == 0 {
		return 0
	}
	return r.MaxPriceRatio
}

// Bound leaves out of cands (ranked for p) the instance types p's rule
// does not allow, and, when Ceiling(p) is not 0, those above the ceiling
// against cheapest: the first candidate ranked for p's requests without
// the instance types it names. A *ForbiddenError says why none is left.
func (c Config) Bound(p Pod, cands []match.Candidate, cheapest match.Candidate) ([]match.Candidate, error) {
	r, bounded := c.rule(p)
	if !bounded || len(p.InstanceTypes) == 0 {
		return cands, nil
	}
	it := p.InstanceTypes[0]
	asks := fmt.Sprintf("%s asks for instance type %q", it.Source, it.Pattern)
	out := slices.DeleteFunc(slices.Clone(cands), func(cand match.Candidate) bool { return !matchesAny(r.InstanceTypes, cand.InstanceType) })
	if len(out) == 0 {
		return nil, forbid(r, p, asks, "instanceTypes", r.InstanceTypes)
	}
	ratio := r.MaxPriceRatio
	if ratio == 0 {
		return out, nil
	}
	out = slices.DeleteFunc(out, func(cand match.Candidate) bool { return !within(cand, cheapest, ratio) })
	if len(out) == 0 {
		return nil, forbid(r, p, asks, "maxPriceRatio", []string{fmt.Sprintf("at most %g× %s", ratio, describe(cheapest))})
	}
	return out, nil
}

// within reports whether cand is at most ratio times cheapest: its price
// when both prices are known, else its vCPUs and its memory.
func within(cand, cheapest match.Candidate, ratio float64) bool {
	if cand.PriceKnown && cheapest.PriceKnown {
		return cand.HourlyPrice <= ratio*cheapest.HourlyPrice*(1+1e-9)
	}
	return float64(cand.MilliCPU) <= ratio*float64(cheapest.MilliCPU) && float64(cand.MemoryBytes) <= ratio*float64(cheapest.MemoryBytes)
}

// describe says what the ceiling is a multiple of.
func describe(cheapest match.Candidate) string {
	if cheapest.PriceKnown {
		return fmt.Sprintf("the hourly price of %s ($%.4f), the cheapest instance type that fits the pod's requests", cheapest.InstanceType, cheapest.HourlyPrice)
	}
	return fmt.Sprintf("the vCPUs and memory of %s, the cheapest instance type that fits the pod's requests (its price is unknown)", cheapest.InstanceType)
}
