package match

import (
	"fmt"
	"math"
	"time"

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
)

// Config tunes the matcher. The zero value is usable: every empty field
// takes the default documented on it (DefaultConfig only adds an agent
// reserve).
type Config struct {
	// AgentReserveMilliCPU and AgentReserveMemoryBytes are added to every
	// pod's requirement for the cell agent and the OS.
	AgentReserveMilliCPU    int64 `koanf:"agentReserveMilliCPU"`
	AgentReserveMemoryBytes int64 `koanf:"agentReserveMemoryBytes"`
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
	// any. kip sets the virtual node's kubernetes.io/arch: the scheduler
	// placed the pod on a node of that architecture, and its images may
	// exist for no other.
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

// DefaultConfig is the configuration kip starts from: the zero Config plus
// an agent reserve of 100 millicores and 256 MiB.
func DefaultConfig() Config {
	return Config{AgentReserveMilliCPU: 100, AgentReserveMemoryBytes: 256 << 20}
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch {
	case c.AgentReserveMilliCPU < 0 || c.AgentReserveMemoryBytes < 0:
		return fmt.Errorf("agent reserve must not be negative")
	case c.BurstablePolicy != "" && c.BurstablePolicy != BurstableBaseline && c.BurstablePolicy != BurstableUnlimited:
		return fmt.Errorf("burstablePolicy %q: want %q or %q", c.BurstablePolicy, BurstableBaseline, BurstableUnlimited)
	case !(c.SurplusCreditPricePerVCPUHour >= 0) || math.IsInf(c.SurplusCreditPricePerVCPUHour, 0):
		return fmt.Errorf("surplusCreditPricePerVCPUHour must be a non-negative number")
	case c.UnknownPrice != "" && c.UnknownPrice != UnknownPriceLast && c.UnknownPrice != UnknownPriceExclude:
		return fmt.Errorf("unknownPrice %q: want %q or %q", c.UnknownPrice, UnknownPriceLast, UnknownPriceExclude)
	case c.DefaultCapacityType != "" && c.DefaultCapacityType != pluginapi.CapacityOnDemand && c.DefaultCapacityType != pluginapi.CapacitySpot:
		return fmt.Errorf("defaultCapacityType %q: want %q or %q", c.DefaultCapacityType, pluginapi.CapacityOnDemand, pluginapi.CapacitySpot)
	}
	return nil
}

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

func (c Config) gpuResources() []string {
	if len(c.GPUResources) == 0 {
		return defaultGPUResources
	}
	return c.GPUResources
}
