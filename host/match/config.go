package match

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/host/setting"
	"github.com/kipcell/kip/pluginapi"
)

// Annotations and node-selector labels the matcher reads.
const (
	// AnnotationInstanceType names the instance type of the pod's cell, or
	// a glob over names (path.Match syntax: *, ?, [a-z]), such as "c5.*".
	AnnotationInstanceType = "kipcell.io/instance-type"
	// AnnotationCapacityType is "spot" or "on-demand". The node-selector
	// label of the same name is read too.
	AnnotationCapacityType = "kipcell.io/capacity-type"
	// AnnotationSpotFallback is "true" or "false": whether a spot pod may
	// run on on-demand when no spot offering fits or launches. Absent
	// means Config.SpotFallback.
	AnnotationSpotFallback = "kipcell.io/spot-fallback"
	// AnnotationGPUKind is the accelerator model the pod needs ("t4",
	// "a100"). The node-selector label of the same name is read too.
	AnnotationGPUKind = "kipcell.io/gpu-kind"

	// AnnotationElotlInstanceType is Elotl Kip's instance-type annotation,
	// read like AnnotationInstanceType.
	AnnotationElotlInstanceType = "pod.elotl.co/instance-type"
	// AnnotationElotlLaunchType is Elotl Kip's launch type: "spot" or
	// "on-demand"; "dedicated" (dedicated tenancy) is refused.
	AnnotationElotlLaunchType = "pod.elotl.co/launch-type"

	// LabelCapacityType and LabelGPUKind are node-selector keys.
	LabelCapacityType = AnnotationCapacityType
	LabelGPUKind      = AnnotationGPUKind
	// LabelKarpenterCapacityType is Karpenter's capacity-type label,
	// accepted in node selectors.
	LabelKarpenterCapacityType = "karpenter.sh/capacity-type"
	// LabelGKEAccelerator is GKE's accelerator label
	// ("nvidia-tesla-t4"), accepted in node selectors as a GPU kind.
	LabelGKEAccelerator = "cloud.google.com/gke-accelerator"
	// LabelElotlGPUPrefix starts Elotl Kip's GPU node-selector keys:
	// node.elotl.co/gpu-<kind>, with any value.
	LabelElotlGPUPrefix = "node.elotl.co/gpu-"
)

// BurstablePolicy says when a burstable (CPU-credit) instance type may be
// chosen.
type BurstablePolicy string

// Burstable policies.
const (
	// BurstableBaseline chooses a burstable type only when its baseline
	// covers the pod's CPU; the instance then never runs short of credits.
	BurstableBaseline BurstablePolicy = "baseline"
	// BurstableUnlimited also chooses a burstable type whose baseline is
	// below the pod's CPU (its full vCPUs must still cover it), pricing
	// in surplus credits: Config.SurplusCreditPricePerVCPUHour for each
	// vCPU of the request above the baseline. Such a candidate carries
	// UnlimitedCredits, and the host must launch it with unlimited
	// credits.
	BurstableUnlimited BurstablePolicy = "unlimited"
)

// UnknownPriceRule says how an offering without a known price ranks.
type UnknownPriceRule string

// Unknown-price rules.
const (
	// UnknownPriceLast ranks an offering with an unknown price after every
	// offering of the same capacity type with a known price; among
	// themselves they rank by vCPU, memory, name and zone (smallest
	// first). A price is never guessed.
	UnknownPriceLast UnknownPriceRule = "last"
	// UnknownPriceExclude never chooses an offering with an unknown price.
	UnknownPriceExclude UnknownPriceRule = "exclude"
)

// Defaults.
const (
	DefaultMaxCandidates                 = 20
	DefaultUnavailableTTL                = 3 * time.Minute
	DefaultSurplusCreditPricePerVCPUHour = 0.05 // AWS T3/T4g unlimited surplus credits, Linux
	// DefaultAgentReserveMilliCPU and DefaultAgentReserveMemoryBytes are
	// the agent reserve of DefaultConfig.
	DefaultAgentReserveMilliCPU    = 100
	DefaultAgentReserveMemoryBytes = 256 << 20
)

// ArchAny is the DefaultArch, in kip.yaml, of pods that may run on any
// architecture (WithNodeArch).
const ArchAny = "any"

// Config tunes the matcher; it is the match section of kip.yaml, each
// field's koanf tag its key. The zero value is usable: every empty field
// takes the default documented on it, and DefaultConfig spells out the
// defaults kip starts from (the same, plus an agent reserve).
type Config struct {
	// AgentReserveMilliCPU and AgentReserveMemoryBytes are added to every
	// pod's requirement for the cell agent and the OS. kip.yaml writes
	// them as quantities (agentReserveCPU: 100m, agentReserveMemory:
	// 256Mi).
	AgentReserveMilliCPU    MilliCPU `koanf:"agentReserveCPU"`
	AgentReserveMemoryBytes Bytes    `koanf:"agentReserveMemory"`
	// IgnoreLimits stops a container's limit from standing in for a
	// missing request of CPU or memory. False (the default) uses the limit:
	// the cell is sized for what the container may use. Extended
	// resources always use the limit, as Kubernetes does.
	IgnoreLimits bool `koanf:"ignoreLimits"`
	// BurstablePolicy is "baseline" (empty means baseline) or
	// "unlimited".
	BurstablePolicy BurstablePolicy `koanf:"burstablePolicy"`
	// SurplusCreditPricePerVCPUHour is the price, in US dollars, of one
	// vCPU-hour above a burstable type's baseline under the unlimited
	// policy; zero means DefaultSurplusCreditPricePerVCPUHour.
	SurplusCreditPricePerVCPUHour float64 `koanf:"surplusCreditPricePerVCPUHour"`
	// UnknownPrice is "last" (empty means last) or "exclude".
	UnknownPrice UnknownPriceRule `koanf:"unknownPrice"`
	// DefaultCapacityType applies to pods that name none; empty means
	// on-demand.
	DefaultCapacityType pluginapi.CapacityType `koanf:"defaultCapacityType"`
	// DefaultArch is the architecture of pods that name none; empty means
	// any. In kip.yaml, empty means the virtual node's kubernetes.io/arch
	// (node.arch: the scheduler placed the pod on a node of that
	// architecture, and its images may exist for no other) and ArchAny
	// means any; kip applies that with WithNodeArch.
	DefaultArch pluginapi.Arch `koanf:"defaultArch"`
	// SpotFallback is the default of AnnotationSpotFallback: whether a spot
	// pod may also run on on-demand. False by default: a pod that asked
	// for spot is never silently billed at on-demand prices.
	SpotFallback bool `koanf:"spotFallback"`
	// GPUResources are the extended resources counted as GPUs; empty means
	// nvidia.com/gpu, amd.com/gpu and gpu.intel.com/i915.
	GPUResources []string `koanf:"gpuResources"`
	// IgnoredResources are extended resources the cell provides itself;
	// the matcher does not look for them in the catalog. Any other
	// extended resource that is not a GPU makes the pod unsatisfiable,
	// because no catalog entry offers it.
	IgnoredResources []string `koanf:"ignoredResources"`
	// MaxCandidates bounds the ranked list per capacity type; zero means
	// DefaultMaxCandidates, negative means no bound.
	MaxCandidates int `koanf:"maxCandidates"`
}

// DefaultConfig is the configuration kip starts from: every default
// spelled out, and an agent reserve of 100 millicores and 256 MiB.
func DefaultConfig() Config {
	return Config{
		AgentReserveMilliCPU:          DefaultAgentReserveMilliCPU,
		AgentReserveMemoryBytes:       DefaultAgentReserveMemoryBytes,
		BurstablePolicy:               BurstableBaseline,
		SurplusCreditPricePerVCPUHour: DefaultSurplusCreditPricePerVCPUHour,
		UnknownPrice:                  UnknownPriceLast,
		DefaultCapacityType:           pluginapi.CapacityOnDemand,
		MaxCandidates:                 DefaultMaxCandidates,
	}
}

// WithNodeArch returns c with kip.yaml's DefaultArch resolved for a virtual
// node of architecture arch: empty becomes arch, ArchAny becomes empty (no
// default).
func (c Config) WithNodeArch(arch pluginapi.Arch) Config {
	switch c.DefaultArch {
	case "":
		c.DefaultArch = arch
	case ArchAny:
		c.DefaultArch = ""
	}
	return c
}

// Validate reports every invalid field as a *setting.Error naming its key.
func (c Config) Validate() error {
	var errs []error
	if c.AgentReserveMilliCPU < 0 {
		errs = append(errs, setting.Errorf("agentReserveCPU", "%s is negative", c.AgentReserveMilliCPU))
	}
	if c.AgentReserveMemoryBytes < 0 {
		errs = append(errs, setting.Errorf("agentReserveMemory", "%s is negative", c.AgentReserveMemoryBytes))
	}
	if c.BurstablePolicy != "" && c.BurstablePolicy != BurstableBaseline && c.BurstablePolicy != BurstableUnlimited {
		errs = append(errs, setting.Errorf("burstablePolicy", "%q: want %q or %q", c.BurstablePolicy, BurstableBaseline, BurstableUnlimited))
	}
	if !(c.SurplusCreditPricePerVCPUHour >= 0) || math.IsInf(c.SurplusCreditPricePerVCPUHour, 0) {
		errs = append(errs, setting.Errorf("surplusCreditPricePerVCPUHour", "must be a non-negative number"))
	}
	if c.UnknownPrice != "" && c.UnknownPrice != UnknownPriceLast && c.UnknownPrice != UnknownPriceExclude {
		errs = append(errs, setting.Errorf("unknownPrice", "%q: want %q or %q", c.UnknownPrice, UnknownPriceLast, UnknownPriceExclude))
	}
	if c.DefaultCapacityType != "" && c.DefaultCapacityType != pluginapi.CapacityOnDemand && c.DefaultCapacityType != pluginapi.CapacitySpot {
		errs = append(errs, setting.Errorf("defaultCapacityType", "%q: want %q or %q", c.DefaultCapacityType, pluginapi.CapacityOnDemand, pluginapi.CapacitySpot))
	}
	return errors.Join(errs...)
}

// MilliCPU is an amount of CPU in millicores. As text (kip.yaml, KIP_*
// variables) it is a Kubernetes quantity: 100m, 0.5, 2.
type MilliCPU int64

// maxReserveCPU bounds a CPU quantity read as text: more is a typo (and
// would overflow).
const maxReserveCPU = 1 << 20

// UnmarshalText reads a CPU quantity of at least zero.
func (m *MilliCPU) UnmarshalText(text []byte) error {
	q, err := readQuantity(text, maxReserveCPU, "CPU", "100m")
	*m = MilliCPU(q.MilliValue())
	return err
}

// MarshalText writes m as a quantity.
func (m MilliCPU) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// String writes m as a quantity: 100m, 2.
func (m MilliCPU) String() string {
	return resource.NewMilliQuantity(int64(m), resource.DecimalSI).String()
}

// Bytes is an amount of memory in bytes. As text (kip.yaml, KIP_*
// variables) it is a Kubernetes quantity: 256Mi, 1G.
type Bytes int64

// maxReserveMemory bounds a memory quantity read as text: more is a typo
// (and would overflow).
const maxReserveMemory = 1 << 50

// UnmarshalText reads a memory quantity of at least zero.
func (b *Bytes) UnmarshalText(text []byte) error {
	q, err := readQuantity(text, maxReserveMemory, "memory", "256Mi")
	*b = Bytes(q.Value())
	return err
}

// readQuantity reads a quantity from 0 to limit (zero on error).
func readQuantity(text []byte, limit float64, what, example string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(string(text))
	if err != nil || q.Sign() < 0 || q.AsApproximateFloat64() > limit {
		return resource.Quantity{}, fmt.Errorf("%q is not a %s quantity >= 0 such as %s", text, what, example)
	}
	return q, nil
}

// MarshalText writes b as a quantity.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// String writes b as a quantity: 256Mi.
func (b Bytes) String() string { return resource.NewQuantity(int64(b), resource.BinarySI).String() }

func (c Config) burstable() BurstablePolicy {
	if c.BurstablePolicy == "" {
		return BurstableBaseline
	}
	return c.BurstablePolicy
}

func (c Config) surplusPrice() float64 {
	if c.SurplusCreditPricePerVCPUHour == 0 {
		return DefaultSurplusCreditPricePerVCPUHour
	}
	return c.SurplusCreditPricePerVCPUHour
}

func (c Config) unknownPrice() UnknownPriceRule {
	if c.UnknownPrice == "" {
		return UnknownPriceLast
	}
	return c.UnknownPrice
}

func (c Config) defaultCapacityType() pluginapi.CapacityType {
	if c.DefaultCapacityType == "" {
		return pluginapi.CapacityOnDemand
	}
	return c.DefaultCapacityType
}

func (c Config) maxCandidates() int {
	switch {
	case c.MaxCandidates == 0:
		return DefaultMaxCandidates
	case c.MaxCandidates < 0:
		return int(^uint(0) >> 1)
	}
	return c.MaxCandidates
}

var defaultGPUResources = []string{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915"}

// GPUResourceNames are the extended resources counted as GPUs
// (GPUResources, or the default nvidia.com/gpu, amd.com/gpu and
// gpu.intel.com/i915).
func (c Config) GPUResourceNames() []string { return slices.Clone(c.gpuResources()) }

func (c Config) gpuResources() []string {
	if len(c.GPUResources) == 0 {
		return defaultGPUResources
	}
	return c.GPUResources
}
