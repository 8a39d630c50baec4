package match

import (
	"cmp"
	"math"
	"path"
	"slices"
	"sync"

	"github.com/kipcell/kip/pluginapi"
)

// Candidate is one offering a pod may launch on, in rank order.
type Candidate struct {
	InstanceType string
	Zone         string
	CapacityType pluginapi.CapacityType
	// HourlyPrice is the price ranked on, in US dollars per hour: the
	// offering's price plus any surplus-credit charge. Zero and
	// meaningless unless PriceKnown.
	HourlyPrice float64
	PriceKnown  bool
	// UnlimitedCredits is set for a burstable type chosen under the
	// unlimited policy with a baseline below the pod's CPU: the host must
	// launch it with unlimited CPU credits. SurplusCreditPrice is the part
	// of HourlyPrice that pays for them.
	UnlimitedCredits   bool
	SurplusCreditPrice float64
	// MilliCPU and MemoryBytes are the instance's size.
	MilliCPU    int64
	MemoryBytes int64
}

// Catalog is an instance-type catalog indexed for Rank. Build one with
// NewCatalog each time the plugin's catalog changes; it is immutable (but
// for internal caches) and safe for concurrent use.
type Catalog struct {
	types   []ctype          // sorted by vCPU, memory, name; the index is the type's order
	hot     []hotType        // the fields fits reads, parallel to types
	byName  map[string]int32 // name → index in types
	zones   []string         // sorted; the index is the zone's order
	archs   []pluginapi.Arch // interned; hotType.arch indexes it
	kinds   []string         // interned GPU kinds; hotType.kind indexes it
	offers  []offer          // every offering, grouped by type (ctype.lo, hi) then capacity type (ctype.ct)
	byPrice [numCT][]entry   // per capacity type, each type's best available offering, in rank order
	gpuOnly [numCT][]entry   // the same, of the types with GPUs only
	pool    sync.Pool        // *scratch

	mu     sync.Mutex // guards nglobs
	globs  sync.Map   // glob pattern → []uint64 bitset of matching types
	nglobs int        // entries in globs, at most maxGlobCache
}

type ctype struct {
	name     string
	milliCPU int64
	mem      int64
	baseline int64
	gpuCount int64
	gpuKind  string
	arch     pluginapi.Arch
	lo, hi   int32           // its offerings in Catalog.offers
	ct       [numCT][2]int32 // its offerings of each capacity type in Catalog.offers
}

type hotType struct {
	milliCPU, mem, baseline, gpuCount int64
	arch, kind                        int32
}

// entry is a type's best offering in Catalog.byPrice, with the size the
// rank loop checks before looking the type up.
type entry struct {
	offer
	milliCPU, mem int64
	arch          int32
}

// offer is one offering. Its rank key is (key, tie): key is the IEEE bits
// of its price, which order like the prices themselves for the
// non-negative numbers they are, or unknownKey; tie is its type order and
// zone order packed.
type offer struct {
	key   uint64
	typ   int32
	zone  int32
	ct    uint8
	avail bool
}

const unknownKey = math.MaxUint64

func priceKey(p float64) uint64 { return math.Float64bits(p + 0) } // + 0 turns -0 into 0

func (o *offer) known() bool   { return o.key != unknownKey }
func (o offer) price() float64 { return math.Float64frombits(o.key) }
func (o offer) tie() uint64    { return uint64(o.typ)<<32 | uint64(uint32(o.zone)) }
func (it item) typ() int32     { return int32(it.tie >> 32) }
func (it item) zone() int32    { return int32(uint32(it.tie)) }
func (it item) known() bool    { return it.key != unknownKey }
func (it item) price() float64 { return math.Float64frombits(it.key) }
func cmpItem(a, b item) int    { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.tie, b.tie)) }
func cmpOffer(a, b offer) int  { return cmpItem(item{a.key, a.tie()}, item{b.key, b.tie()}) }

const (
	ctOnDemand = iota
	ctSpot
	numCT
)

func ctIndex(ct pluginapi.CapacityType) int {
	switch ct {
	case pluginapi.CapacityOnDemand:
		return ctOnDemand
	case pluginapi.CapacitySpot:
		return ctSpot
	}
	return -1
}

var ctNames = [numCT]pluginapi.CapacityType{pluginapi.CapacityOnDemand, pluginapi.CapacitySpot}

const maxGlobCache = 256

// NewCatalog indexes types. A later type with the name of an earlier one
// is dropped; offerings of a capacity type other than on-demand or spot
// are ignored; a price that is negative, NaN or infinite is treated as
// unknown.
func NewCatalog(types []pluginapi.InstanceType) *Catalog {
	c := &Catalog{byName: make(map[string]int32, len(types))}
	order := make([]int, 0, len(types))
	seen := make(map[string]bool, len(types))
	zoneSet := make(map[string]bool)
	for i := range types {
		if seen[types[i].Name] {
			continue
		}
		seen[types[i].Name] = true
		order = append(order, i)
		for _, o := range types[i].Offerings {
			zoneSet[o.Zone] = true
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &types[a], &types[b]
		return cmp.Or(cmp.Compare(x.MilliCPU, y.MilliCPU), cmp.Compare(x.MemoryBytes, y.MemoryBytes), cmp.Compare(x.Name, y.Name))
	})
	for z := range zoneSet {
		c.zones = append(c.zones, z)
	}
	slices.Sort(c.zones)
	zoneIdx := make(map[string]int32, len(c.zones))
	for i, z := range c.zones {
		zoneIdx[z] = int32(i)
	}
	c.types = make([]ctype, len(order))
	c.hot = make([]hotType, len(order))
	for ti, i := range order {
		t := &types[i]
		c.byName[t.Name] = int32(ti)
		ct := ctype{
			name: t.Name, milliCPU: t.MilliCPU, mem: t.MemoryBytes, baseline: t.BurstableBaselineMilliCPU,
			gpuCount: int64(t.GPU.Count), gpuKind: normaliseGPUKind(t.GPU.Kind), arch: t.Arch,
			lo: int32(len(c.offers)),
		}
		c.hot[ti] = hotType{milliCPU: ct.milliCPU, mem: ct.mem, baseline: ct.baseline, gpuCount: ct.gpuCount,
			arch: intern(&c.archs, ct.arch), kind: intern(&c.kinds, ct.gpuKind)}
		for _, o := range t.Offerings {
			cti := ctIndex(o.CapacityType)
			if cti < 0 {
				continue
			}
			key := uint64(unknownKey)
			if o.PriceKnown && o.HourlyPrice >= 0 && !math.IsInf(o.HourlyPrice, 0) {
				key = priceKey(o.HourlyPrice)
			}
			c.offers = append(c.offers, offer{key: key, typ: int32(ti), zone: zoneIdx[o.Zone], ct: uint8(cti), avail: o.Available})
		}
		ct.hi = int32(len(c.offers))
		mine := c.offers[ct.lo:ct.hi]
		slices.SortFunc(mine, func(a, b offer) int { return cmp.Or(cmp.Compare(a.ct, b.ct), cmp.Compare(a.zone, b.zone)) })
		for cti := range numCT {
			var best offer
			found := false
			ct.ct[cti] = [2]int32{ct.hi, ct.hi}
			for j, o := range mine {
				if int(o.ct) != cti {
					continue
				}
				if ct.ct[cti][0] == ct.hi {
					ct.ct[cti][0] = ct.lo + int32(j)
				}
				ct.ct[cti][1] = ct.lo + int32(j) + 1
				if o.avail && (!found || cmpOffer(o, best) < 0) {
					best, found = o, true
				}
			}
			if found {
				e := entry{offer: best, milliCPU: ct.milliCPU, mem: ct.mem, arch: c.hot[ti].arch}
				c.byPrice[cti] = append(c.byPrice[cti], e)
				if ct.gpuCount > 0 {
					c.gpuOnly[cti] = append(c.gpuOnly[cti], e)
				}
			}
		}
		c.types[ti] = ct
	}
	byRank := func(a, b entry) int { return cmpOffer(a.offer, b.offer) }
	for i := range numCT {
		slices.SortFunc(c.byPrice[i], byRank)
		slices.SortFunc(c.gpuOnly[i], byRank)
	}
	c.pool.New = func() any { return &scratch{} }
	return c
}

func intern[T comparable](list *[]T, v T) int32 {
	if i := slices.Index(*list, v); i >= 0 {
		return int32(i)
	}
	*list = append(*list, v)
	return int32(len(*list) - 1)
}

// Len is the number of instance types.
func (c *Catalog) Len() int { return len(c.types) }

// HasGPUs reports whether an instance type of the catalog has a GPU.
func (c *Catalog) HasGPUs() bool {
	for i := range c.hot {
		if c.hot[i].gpuCount > 0 {
			return true
		}
	}
	return false
}

// Size returns the vCPU (×1000) and memory of the named type.
func (c *Catalog) Size(name string) (milliCPU, memoryBytes int64, ok bool) {
	i, ok := c.byName[name]
	if !ok {
		return 0, 0, false
	}
	return c.types[i].milliCPU, c.types[i].mem, true
}

// item is a candidate during ranking: the rank key of an offering with its
// effective price (with any surplus-credit charge). Items order by key
// (known prices first, cheapest first), then by type order (vCPU, memory,
// name), then zone.
type item struct {
	key, tie uint64
}

// scratch is per-call working memory, pooled.
type scratch struct {
	zones []uint64 // bitset over zones
	heap  []item   // max-heap on cmpItem, then sorted
	out   []item   // the sorted heaps of every capacity type
	outCT []uint8
	names []resolvedName // the request's name patterns, in order
}

func bit(s []uint64, i int32) bool { return s[i>>6]&(1<<(uint(i)&63)) != 0 }
func setBit(s []uint64, i int32)   { s[i>>6] |= 1 << (uint(i) & 63) }

func resetBits(s []uint64, n int) []uint64 {
	w := (n + 63) / 64
	if cap(s) < w {
		s = make([]uint64, w)
	}
	s = s[:w]
	clear(s)
	return s
}

// Rank ranks the catalog's offerings for req; see AppendRank.
func (c *Catalog) Rank(req Requirements, unavailable func(typ, zone string, ct pluginapi.CapacityType) bool, cfg Config) ([]Candidate, error) {
	return c.AppendRank(nil, req, unavailable, cfg)
}

// ranker holds one ranking's inputs, resolved once, and the rules over
// them (rules.go).
type ranker struct {
	c           *Catalog
	s           *scratch
	req         Requirements
	unavailable func(typ, zone string, ct pluginapi.CapacityType) bool
	cpu, mem    int64
	gpus        int64
	arch, kind  int32 // interned; anyIndex for any, len(c.archs) or len(c.kinds) for one no type has
	unlimited   bool
	exclude     bool
	anyZone     bool
	surplus     float64
	k           int
	minType     int32        // the first type with enough vCPUs
	named       int32        // the type the first exact name pattern names, or -1
	cts         [numCT]uint8 // the capacity types to rank, in the request's order, once each
	ncts        int
}

// anyIndex is the ranker's interned architecture or GPU kind when the
// request asks for none.
const anyIndex = -1

// AppendRank appends to dst the offerings that fit req, best first, and
// returns it; an *UnsatisfiableError saying why when none does.
//
// An offering fits when its type matches every name pattern, has the
// architecture, enough GPUs of the kind, vCPU and memory (and, for a
// burstable type under the baseline policy, a baseline covering the CPU),
// and it is in an acceptable zone and capacity type, available in the
// catalog, not marked by unavailable (which may be nil), and, under
// UnknownPriceExclude, priced.
//
// Order: capacity type in req.CapacityTypes order, then known prices
// before unknown ones, then price (with any surplus-credit charge)
// ascending, then vCPU, memory, name and zone ascending, at most cfg's
// MaxCandidates per capacity type.
func (c *Catalog) AppendRank(dst []Candidate, req Requirements, unavailable func(typ, zone string, ct pluginapi.CapacityType) bool, cfg Config) ([]Candidate, error) {
	s := c.pool.Get().(*scratch)
	defer c.pool.Put(s)
	r := ranker{
		c: c, s: s, req: req, unavailable: unavailable,
		cpu: req.MilliCPU, mem: req.MemoryBytes, arch: -1, kind: -1,
		unlimited: cfg.burstable() == BurstableUnlimited, exclude: cfg.unknownPrice() == UnknownPriceExclude,
		anyZone: len(req.Zones) == 0, surplus: cfg.surplusPrice(), k: cfg.maxCandidates(),
	}
	s.out, s.outCT = s.out[:0], s.outCT[:0]
	if r.prepare() {
		for _, cti := range r.cts[:r.ncts] {
			r.rank(int(cti))
		}
	}
	if len(s.out) == 0 {
		return dst, r.explain()
	}
	dst = slices.Grow(dst, len(s.out))
	for i, it := range s.out {
		t := &c.types[it.typ()]
		cand := Candidate{
			InstanceType: t.name, Zone: c.zones[it.zone()], CapacityType: ctNames[s.outCT[i]],
			PriceKnown: it.known(), MilliCPU: t.milliCPU, MemoryBytes: t.mem,
		}
		cand.SurplusCreditPrice, cand.UnlimitedCredits = r.surcharge(it.typ())
		if cand.PriceKnown {
			cand.HourlyPrice = it.price()
		} else {
			cand.SurplusCreditPrice = 0
		}
		dst = append(dst, cand)
	}
	return dst, nil
}

// prepare resolves the request against the catalog, for the rules;
// false when no type can fit, so that there is nothing to rank.
func (r *ranker) prepare() bool {
	c, s, req := r.c, r.s, &r.req
	found := true // every architecture, GPU kind and exact name asked for is in the catalog
	resolve := func(i int, n int) int32 {
		if i < 0 {
			found = false
			return int32(n) // an index no type has
		}
		return int32(i)
	}
	if req.Arch != "" {
		r.arch = resolve(slices.Index(c.archs, req.Arch), len(c.archs))
	}
	if req.GPUKind != "" {
		r.kind = resolve(slices.Index(c.kinds, req.GPUKind), len(c.kinds))
	}
	if req.GPUCount > 0 || req.GPUKind != "" {
		r.gpus = max(req.GPUCount, 1)
	}
	s.names, r.named = s.names[:0], -1
	for _, p := range req.InstanceTypes {
		if p.IsGlob() {
			s.names = append(s.names, resolvedName{glob: c.globBits(p.Pattern)})
			continue
		}
		i, ok := c.byName[p.Pattern]
		if !ok {
			found, i = false, -1
		} else if r.named < 0 {
			r.named = i
		}
		s.names = append(s.names, resolvedName{typ: i, exact: true})
	}
	first, _ := slices.BinarySearchFunc(c.types, r.cpu, func(t ctype, cpu int64) int { return cmp.Compare(t.milliCPU, cpu) })
	r.minType = int32(first)
	if !r.anyZone {
		s.zones = resetBits(s.zones, len(c.zones))
		for _, z := range req.Zones {
			if i, ok := slices.BinarySearch(c.zones, z); ok {
				setBit(s.zones, int32(i))
			}
		}
	}
	for _, ct := range req.CapacityTypes {
		if cti := ctIndex(ct); cti >= 0 && !r.wantsCT(uint8(cti)) {
			r.cts[r.ncts] = uint8(cti)
			r.ncts++
		}
	}
	return found && !r.asksExtended() && first < len(c.types)
}

// fits reports whether type i meets the type rules: names, architecture,
// GPUs, size and burstable baseline. (Zones are offering rules here.)
func (r *ranker) fits(i int32) bool {
	if i < r.minType {
		return false // too few vCPUs: types are in vCPU order
	}
	h := &r.c.hot[i]
	return r.largeEnough(h.milliCPU, h.mem) && r.hasArch(h.arch) && r.hasGPUs(h) &&
		r.baselineCovers(h) && r.matchesNames(i)
}

// rank appends the best offerings of capacity type cti to s.out.
//
// It visits the types in order of their best offering (byPrice) and stops
// once the heap is full and a type's best offering ranks after the heap's
// worst: effective prices are never below base prices, so no later type
// can do better. A named type is visited alone.
func (r *ranker) rank(cti int) {
	c, s := r.c, r.s
	s.heap = s.heap[:0]
	if r.named >= 0 {
		r.scanType(r.named, cti)
	} else {
		list := c.byPrice[cti]
		if r.gpus > 0 {
			list = c.gpuOnly[cti]
		}
		for i := range list {
			best := &list[i]
			if len(s.heap) >= r.k && cmpItem(item{best.key, best.tie()}, s.heap[0]) > 0 {
				break
			}
			if !r.priceAllowed(&best.offer) {
				break // the rest have no known price either
			}
			if !r.largeEnough(best.milliCPU, best.mem) || !r.hasArch(best.arch) {
				continue // the common rejections, decided without the type
			}
			r.scanType(best.typ, cti)
		}
	}
	slices.SortFunc(s.heap, cmpItem)
	s.out = append(s.out, s.heap...)
	for range s.heap {
		s.outCT = append(s.outCT, uint8(cti))
	}
}

func (r *ranker) scanType(i int32, cti int) {
	if !r.fits(i) {
		return
	}
	rg := r.c.types[i].ct[cti]
	offers := r.c.offers[rg[0]:rg[1]]
	for j := range offers {
		if o := &offers[j]; o.avail && r.priceAllowed(o) {
			r.consider(o)
		}
	}
}

// consider adds offering o of a fitting type to the heap if it is in an
// acceptable zone, beats the heap's worst and is not marked unavailable.
func (r *ranker) consider(o *offer) {
	s := r.s
	if !r.inZone(o) {
		return
	}
	it := item{key: o.key, tie: o.tie()}
	if sur, _ := r.surcharge(o.typ); sur > 0 && o.known() {
		it.key = priceKey(o.price() + sur)
	}
	full := len(s.heap) >= r.k
	if full && cmpItem(it, s.heap[0]) >= 0 {
		return
	}
	if r.marked(o) {
		return
	}
	if !full {
		s.heap = append(s.heap, it)
		for i := len(s.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if cmpItem(s.heap[i], s.heap[p]) <= 0 {
				break
			}
			s.heap[i], s.heap[p] = s.heap[p], s.heap[i]
			i = p
		}
		return
	}
	s.heap[0] = it
	n := len(s.heap)
	for i := 0; ; {
		l, rt, m := 2*i+1, 2*i+2, i
		if l < n && cmpItem(s.heap[l], s.heap[m]) > 0 {
			m = l
		}
		if rt < n && cmpItem(s.heap[rt], s.heap[m]) > 0 {
			m = rt
		}
		if m == i {
			return
		}
		s.heap[i], s.heap[m] = s.heap[m], s.heap[i]
		i = m
	}
}

// surcharge is the surplus-credit price of type i for the pod, and whether
// it needs unlimited credits at all.
func (r *ranker) surcharge(i int32) (float64, bool) {
	h := &r.c.hot[i]
	if !r.unlimited || !r.needsCredits(h) {
		return 0, false
	}
	return float64(r.cpu-h.baseline) / 1000 * r.surplus, true
}

// globBits returns the bitset of types whose name matches pattern, cached.
func (c *Catalog) globBits(pattern string) []uint64 {
	if v, ok := c.globs.Load(pattern); ok {
		return v.([]uint64)
	}
	b := resetBits(nil, len(c.types))
	for i := range c.types {
		if ok, _ := path.Match(pattern, c.types[i].name); ok {
			setBit(b, int32(i))
		}
	}
	c.mu.Lock()
	if c.nglobs >= maxGlobCache {
		c.globs.Clear()
		c.nglobs = 0
	}
	if _, loaded := c.globs.LoadOrStore(pattern, b); !loaded {
		c.nglobs++
	}
	c.mu.Unlock()
	return b
}

// Rank ranks the offerings of catalog for req: NewCatalog(catalog).Rank.
// Callers ranking many pods against one catalog should keep the Catalog.
func Rank(req Requirements, catalog []pluginapi.InstanceType, unavailable func(typ, zone string, ct pluginapi.CapacityType) bool, cfg Config) ([]Candidate, error) {
	return NewCatalog(catalog).Rank(req, unavailable, cfg)
}
