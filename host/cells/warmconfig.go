package cells

import (
	"fmt"
	"math"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kipcell/kip/host/setting"
	"github.com/kipcell/kip/pluginapi"
)

// WarmPoolConfig is the cells.warmPool section of kip.yaml: standby cells
// kept booted so that a pod that fits one runs without waiting for an
// instance to launch and boot (warm.go; the package doc's "Warm pool").
//
//	cells:
//	  warmPool:
//	    maxPremium: 0.2
//	    pools:
//	      - name: small
//	        size: {cpu: "1", memory: 2Gi}
//	        count: 2
//	      - name: medium-spot
//	        instanceType: m7i.large
//	        zone: us-east-1a
//	        capacityType: spot
//	        count: 1
//	        maxAge: 30m
//	        maxPricePerHour: 0.05
type WarmPoolConfig struct {
	// MaxPremium is how much dearer than the cheapest offering that fits
	// a pod a standby cell may be and still be given to it, as a fraction
	// of that price: 0.2 takes a standby up to 20 % dearer. Default 0: no
	// dearer (in practice, the same offering).
	MaxPremium float64 `koanf:"maxPremium"`
	// Pools are the standby cells to keep, one entry per shape.
	Pools []WarmPool `koanf:"pools"`
}

// WarmPool is one shape of standby cell and how many to keep.
type WarmPool struct {
	// Name names the pool in logs, events, metrics and the standby
	// instances' kipcell.io/warm-pool tag: a DNS label of at most 40
	// characters, unique.
	Name string `koanf:"name"`
	// InstanceType is the standby's instance type; or else Size.
	InstanceType string `koanf:"instanceType"`
	// Size is what the standby must hold, as a pod's requests: the
	// matcher (host/match, with the agent reserve) maps it to the
	// cheapest type that fits, as it would a pod of that size.
	Size WarmPoolSize `koanf:"size"`
	// Zone is the standby's zone; empty: the cheapest offering's.
	Zone string `koanf:"zone"`
	// CapacityType is on-demand (the default) or spot.
	CapacityType pluginapi.CapacityType `koanf:"capacityType"`
	// Count is how many standby cells (booting and ready) the pool keeps,
	// never more.
	Count int `koanf:"count"`
	// MaxAge is how long a standby may wait for a pod before it is
	// terminated and replaced; default 1 hour.
	MaxAge time.Duration `koanf:"maxAge"`
	// MaxPricePerHour is a ceiling in US dollars: a pool whose offering
	// costs more, or whose price the catalog does not know, is refused
	// (an error in kip's log) and never launched. 0: no ceiling.
	MaxPricePerHour float64 `koanf:"maxPricePerHour"`
}

// WarmPoolSize is a pool's size as a pod's requests: quantities such as
// "1", "500m", "2Gi".
type WarmPoolSize struct {
	CPU    string `koanf:"cpu"`
	Memory string `koanf:"memory"`
}

// defaultWarmMaxAge is WarmPool.MaxAge's default.
const defaultWarmMaxAge = time.Hour

// maxWarmPoolName bounds a pool's name: it goes into tags, labels and a
// metric label.
const maxWarmPoolName = 40

var warmPoolNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// defaults gives the pools' unset keys their defaults, on a copy.
func (w *WarmPoolConfig) defaults() {
	if len(w.Pools) == 0 {
		return
	}
	pools := make([]WarmPool, len(w.Pools))
	copy(pools, w.Pools)
	for i := range pools {
		if pools[i].CapacityType == "" {
			pools[i].CapacityType = pluginapi.CapacityOnDemand
		}
		if pools[i].MaxAge == 0 {
			pools[i].MaxAge = defaultWarmMaxAge
		}
	}
	w.Pools = pools
}

// validate checks the section, naming each bad key under prefix
// ("warmPool").
func (w WarmPoolConfig) validate(prefix string) []error {
	var errs []error
	if w.MaxPremium < 0 || math.IsNaN(w.MaxPremium) || math.IsInf(w.MaxPremium, 0) {
		errs = append(errs, setting.Errorf(prefix+".maxPremium", "%v is not a fraction of at least 0 (0.2 is 20 %% dearer)", w.MaxPremium))
	}
	seen := map[string]bool{}
	for i, p := range w.Pools {
		key := func(k string) string { return fmt.Sprintf("%s.pools[%d].%s", prefix, i, k) }
		switch {
		case p.Name == "":
			errs = append(errs, setting.Errorf(key("name"), "is empty: every pool has a name"))
		case len(p.Name) > maxWarmPoolName || !warmPoolNameRE.MatchString(p.Name):
			errs = append(errs, setting.Errorf(key("name"), "%q is not a DNS label of at most %d characters", p.Name, maxWarmPoolName))
		case seen[p.Name]:
			errs = append(errs, setting.Errorf(key("name"), "%q names two pools", p.Name))
		}
		seen[p.Name] = true
		sized := p.Size != (WarmPoolSize{})
		switch {
		case p.InstanceType != "" && sized:
			errs = append(errs, setting.Errorf(key("size"), "is set with instanceType %q: give one or the other", p.InstanceType))
		case p.InstanceType == "" && !sized:
			errs = append(errs, setting.Errorf(key("instanceType"), "is empty and so is size: give one or the other"))
		case sized:
			for _, q := range []struct{ k, v string }{{"size.cpu", p.Size.CPU}, {"size.memory", p.Size.Memory}} {
				if v, err := resource.ParseQuantity(q.v); err != nil || v.Sign() <= 0 {
					errs = append(errs, setting.Errorf(key(q.k), "%q is not a positive quantity (1, 500m, 2Gi)", q.v))
				}
			}
		}
		switch p.CapacityType {
		case "", pluginapi.CapacityOnDemand, pluginapi.CapacitySpot:
		default:
			errs = append(errs, setting.Errorf(key("capacityType"), "%q is neither %s nor %s", p.CapacityType, pluginapi.CapacityOnDemand, pluginapi.CapacitySpot))
		}
		if p.Count < 0 {
			errs = append(errs, setting.Errorf(key("count"), "%d is negative", p.Count))
		}
		if p.MaxAge < 0 {
			errs = append(errs, setting.Errorf(key("maxAge"), "%s is negative", p.MaxAge))
		}
		if p.MaxPricePerHour < 0 || math.IsNaN(p.MaxPricePerHour) || math.IsInf(p.MaxPricePerHour, 0) {
			errs = append(errs, setting.Errorf(key("maxPricePerHour"), "%v is not a price of at least 0 (0: no ceiling)", p.MaxPricePerHour))
		}
	}
	return errs
}
