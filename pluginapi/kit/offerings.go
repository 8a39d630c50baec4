package kit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// Sells reports whether the cloud sells the type typ in zone; a nil Sells
// knows nothing, and every offering of the catalog is available.
type Sells func(typ, zone string) bool

// Offerings answers ListInstanceTypes for one configuration from the
// plugin's embedded catalog: the region's types in the configured zones,
// without the types of another architecture than the image's, each
// offering available where the cloud sells the type. The catalog's
// warnings (a region it has no prices for) are logged once per
// configuration. Make one in Configure; it is safe for concurrent use.
type Offerings struct {
	// Catalog loads the embedded catalog (the catalog package's Load).
	Catalog func() (*catalog.Catalog, error)
	// Region and Zones are the configured region and the contract's names
	// of its zones the cells may use.
	Region string
	Zones  []string
	// Arch is the image's architecture: the types of another are left out.
	// "" keeps every type (the image's is not known, or the cloud has one).
	Arch pluginapi.Arch
	// Image names the image in the log line that says how many types of
	// another architecture were left out.
	Image string
	Log   *slog.Logger

	once sync.Once
}

// List returns the instance types. sells, called after the catalog is
// loaded, says where the cloud sells each type (a Sold's answer); its
// error ends the call.
func (o *Offerings) List(ctx context.Context, sells func(context.Context) (Sells, error)) (*pluginapi.ListInstanceTypesResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cat, err := o.Catalog()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	all, warnings := cat.InstanceTypes(o.Region, o.Zones)
	sold, err := sells(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	out := all[:0]
	otherArch := 0
	for _, t := range all {
		if o.Arch != "" && t.Arch != o.Arch {
			otherArch++
			continue
		}
		if sold != nil {
			for i := range t.Offerings {
				t.Offerings[i].Available = sold(t.Name, t.Offerings[i].Zone)
			}
		}
		out = append(out, t)
	}
	o.once.Do(func() {
		for _, w := range warnings {
			o.Log.Warn(w)
		}
		if otherArch > 0 {
			o.Log.Info("catalog: leaving out the types of another architecture than the image's",
				"image", o.Image, "arch", o.Arch, "left_out", otherArch)
		}
	})
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: out}, nil
}

// Sold caches the cloud's answer to where it sells its types, S: one fetch
// at a time (a caller waiting for another's may give up with its ctx),
// kept for a TTL. A fetch refused for want of permission (Denied) is
// logged once, until a fetch succeeds again, and cached as the zero S:
// the plugin then offers every offering of its catalog as available, and
// a launch of a type a zone does not sell fails over to the host's next
// candidate. Make it with NewSold; it is safe for concurrent use.
type Sold[S any] struct {
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger
	fetch func(context.Context) (S, error)

	sem chan struct{} // one fetch at a time

	// Guarded by sem.
	at     time.Time
	sold   S
	denied bool // the last fetch was refused (logged once)
}

// NewSold returns an empty Sold whose answers fetch gets and which keeps
// them for ttl by now. fetch returns the cloud's answer (the zero S for
// an answer that knows nothing, such as an empty one, which it logs), a
// refusal for want of permission as Denied, or another error, which
// Get returns and does not keep.
func NewSold[S any](ttl time.Duration, now func() time.Time, log *slog.Logger, fetch func(context.Context) (S, error)) *Sold[S] {
	return &Sold[S]{ttl: ttl, now: now, log: log, fetch: fetch, sem: make(chan struct{}, 1)}
}

// Get returns the cached answer, fetching it when there is none or it is
// older than the TTL; the zero S when the plugin may not ask.
func (s *Sold[S]) Get(ctx context.Context) (S, error) {
	var zero S
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	defer func() { <-s.sem }()
	if !s.at.IsZero() && s.now().Sub(s.at) < s.ttl {
		return s.sold, nil
	}
	sold, err := s.fetch(ctx)
	if d := (*DeniedError)(nil); errors.As(err, &d) {
		if !s.denied {
			s.log.Warn(d.Warning, "error", d.Err)
		}
		s.denied, s.sold, s.at = true, zero, s.now()
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	s.denied, s.sold, s.at = false, sold, s.now()
	return sold, nil
}

// Peek returns the cached answer without fetching, whatever its age, and
// false while a fetch is under way (or before the first).
func (s *Sold[S]) Peek() (S, bool) {
	var zero S
	select {
	case s.sem <- struct{}{}:
	default:
		return zero, false
	}
	defer func() { <-s.sem }()
	return s.sold, !s.at.IsZero()
}

// DeniedError is a Sold fetch refused for want of permission: Err, the
// cloud's refusal, and Warning, what the plugin logs about it (the
// permission missing, and what the plugin does without it).
type DeniedError struct {
	Warning string
	Err     error
}

// Denied returns the DeniedError of a fetch refused for want of
// permission.
func Denied(warning string, err error) error { return &DeniedError{Warning: warning, Err: err} }

func (e *DeniedError) Error() string { return e.Warning + ": " + e.Err.Error() }

func (e *DeniedError) Unwrap() error { return e.Err }
