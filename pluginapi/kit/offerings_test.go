package kit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

func price(v float64) *float64 { return &v }

// testCatalog is a catalog of three types, two of them amd64, with prices
// in region r1.
func testCatalog() (*catalog.Catalog, error) {
	c := &catalog.Catalog{
		Schema: catalog.Schema, Cloud: "test", GeneratedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Sources: []catalog.Source{{Name: "hand-written", Covers: "everything"}},
		Types: []catalog.Type{
			{Name: "a.large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
			{Name: "b.small", VCPU: 2, MemoryMiB: 2048, Arch: "arm64", NoSpot: true},
			{Name: "c.large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64", NoSpot: true},
		},
		Regions: []catalog.Region{{Name: "r1", Prices: map[string]catalog.Price{
			"a.large": {OnDemand: price(0.1), Spot: price(0.03)},
			"b.small": {OnDemand: price(0.02)},
			"c.large": {OnDemand: price(0.1)},
		}}},
	}
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	return catalog.Parse(data)
}

// available lists name/zone/capacity of every available offering.
func available(types []pluginapi.InstanceType) []string {
	var out []string
	for _, t := range types {
		for _, o := range t.Offerings {
			if o.Available {
				out = append(out, t.Name+"/"+o.Zone+"/"+string(o.CapacityType))
			}
		}
	}
	return out
}

func names(types []pluginapi.InstanceType) []string {
	var out []string
	for _, t := range types {
		out = append(out, t.Name)
	}
	return out
}

func TestOfferingsList(t *testing.T) {
	errSells := errors.New("refused")
	tests := []struct {
		name          string
		region        string
		arch          pluginapi.Arch
		sells         Sells
		sellsErr      error
		wantTypes     []string
		wantAvailable []string
		wantErr       string
		wantLog       []string
	}{
		{
			name: "every offering, every type", region: "r1",
			wantTypes:     []string{"a.large", "b.small", "c.large"},
			wantAvailable: []string{"a.large/z1/on-demand", "a.large/z1/spot", "b.small/z1/on-demand", "c.large/z1/on-demand"},
		},
		{
			name: "the image's architecture", region: "r1", arch: pluginapi.ArchAMD64,
			wantTypes:     []string{"a.large", "c.large"},
			wantAvailable: []string{"a.large/z1/on-demand", "a.large/z1/spot", "c.large/z1/on-demand"},
			wantLog:       []string{"leaving out the types of another architecture", "left_out=1", "image=img-1"},
		},
		{
			name: "where the cloud sells", region: "r1", sells: func(typ, zone string) bool { return typ == "a.large" },
			wantTypes:     []string{"a.large", "b.small", "c.large"},
			wantAvailable: []string{"a.large/z1/on-demand", "a.large/z1/spot"},
		},
		{
			name: "a region without prices", region: "r9",
			wantTypes:     []string{"a.large", "b.small", "c.large"},
			wantAvailable: []string{"a.large/z1/on-demand", "a.large/z1/spot", "b.small/z1/on-demand", "c.large/z1/on-demand"},
			wantLog:       []string{`no prices for region \"r9\"`},
		},
		{name: "the cloud refuses", region: "r1", sellsErr: errSells, wantErr: "listing instance types: refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			o := &Offerings{Catalog: testCatalog, Region: tt.region, Zones: []string{"z1"}, Arch: tt.arch, Image: "img-1",
				Log: slog.New(slog.NewTextHandler(&buf, nil))}
			for range 2 {
				resp, err := o.List(t.Context(), func(context.Context) (Sells, error) { return tt.sells, tt.sellsErr })
				if tt.wantErr != "" {
					if err == nil || err.Error() != tt.wantErr || !errors.Is(err, tt.sellsErr) {
						t.Fatalf("List() = %v, want %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := names(resp.InstanceTypes); !slices.Equal(got, tt.wantTypes) {
					t.Errorf("types = %v, want %v", got, tt.wantTypes)
				}
				if got := available(resp.InstanceTypes); !slices.Equal(got, tt.wantAvailable) {
					t.Errorf("available = %v, want %v", got, tt.wantAvailable)
				}
			}
			log := buf.String()
			for _, w := range tt.wantLog {
				if strings.Count(log, w) != 1 {
					t.Errorf("log has %q %d times, want once (per configuration):\n%s", w, strings.Count(log, w), log)
				}
			}
			if len(tt.wantLog) == 0 && log != "" {
				t.Errorf("log = %s, want nothing", log)
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	o := &Offerings{Catalog: testCatalog, Region: "r1", Log: slog.New(slog.DiscardHandler)}
	if _, err := o.List(ctx, func(context.Context) (Sells, error) { return nil, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled) = %v, want context.Canceled", err)
	}
}

func TestSold(t *testing.T) {
	errRefused := errors.New("403 forbidden")
	errDown := errors.New("503 unavailable")
	type step struct {
		advance time.Duration // the clock, before the Get
		answer  []string      // the fetch's answer, if it fetches
		err     error         // the fetch's error, if it fetches
		want    []string
		wantErr error
		fetches int32 // fetches so far
		logs    int   // denial warnings so far
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"kept for the TTL", []step{
			{answer: []string{"a"}, want: []string{"a"}, fetches: 1},
			{advance: 59 * time.Minute, answer: []string{"b"}, want: []string{"a"}, fetches: 1},
			{advance: time.Minute, answer: []string{"b"}, want: []string{"b"}, fetches: 2},
		}},
		{"an error is not kept", []step{
			{err: errDown, wantErr: errDown, fetches: 1},
			{answer: []string{"a"}, want: []string{"a"}, fetches: 2},
		}},
		{"a denial is logged once and kept", []step{
			{err: Denied("may not list", errRefused), fetches: 1, logs: 1},
			{answer: []string{"a"}, fetches: 1, logs: 1},
			{advance: time.Hour, err: Denied("may not list", errRefused), fetches: 2, logs: 1},
			{advance: time.Hour, answer: []string{"a"}, want: []string{"a"}, fetches: 3, logs: 1},
			{advance: time.Hour, err: Denied("may not list", errRefused), fetches: 4, logs: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
			var buf bytes.Buffer
			var fetches atomic.Int32
			var cur step
			s := NewSold(time.Hour, func() time.Time { return now }, slog.New(slog.NewTextHandler(&buf, nil)),
				func(context.Context) ([]string, error) {
					fetches.Add(1)
					return cur.answer, cur.err
				})
			for i, st := range tt.steps {
				cur = st
				now = now.Add(st.advance)
				got, err := s.Get(t.Context())
				if !errors.Is(err, st.wantErr) || !slices.Equal(got, st.want) {
					t.Errorf("step %d: Get() = %v, %v; want %v, %v", i, got, err, st.want, st.wantErr)
				}
				if n := fetches.Load(); n != st.fetches {
					t.Errorf("step %d: %d fetches, want %d", i, n, st.fetches)
				}
				if n := strings.Count(buf.String(), "may not list"); n != st.logs {
					t.Errorf("step %d: denial logged %d times, want %d:\n%s", i, n, st.logs, buf.String())
				}
			}
			if strings.Count(buf.String(), "403 forbidden") != strings.Count(buf.String(), "may not list") {
				t.Errorf("a denial's log line does not carry its error:\n%s", buf.String())
			}
		})
	}
}

func TestSoldWaitsForOneFetch(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	s := NewSold(time.Hour, time.Now, slog.New(slog.DiscardHandler), func(context.Context) (string, error) {
		close(started)
		<-release
		return "sold", nil
	})
	if got, ok := s.Peek(); ok || got != "" {
		t.Errorf("Peek() before a fetch = %q, %v; want nothing", got, ok)
	}
	done := make(chan string)
	go func() {
		got, _ := s.Get(t.Context())
		done <- got
	}()
	<-started
	if _, ok := s.Peek(); ok {
		t.Error("Peek() during a fetch = true, want false")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get() waiting, ctx cancelled = %v, want context.Canceled", err)
	}
	close(release)
	if got := <-done; got != "sold" {
		t.Errorf("Get() = %q, want sold", got)
	}
	if got, ok := s.Peek(); !ok || got != "sold" {
		t.Errorf("Peek() after a fetch = %q, %v; want sold", got, ok)
	}
}

func TestInfo(t *testing.T) {
	errBroken := errors.New("broken")
	tests := []struct {
		name    string
		catalog func() (*catalog.Catalog, error)
		wantErr error
	}{
		{"the embedded catalog", testCatalog, nil},
		{"a broken catalog", func() (*catalog.Catalog, error) { return nil, errBroken }, errBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := Info{Name: "toy", Version: "1.2.3", Capabilities: []pluginapi.Capability{pluginapi.CapabilitySpot}, ConfigSchema: `{"type":"object"}`, Catalog: tt.catalog}
			got, err := info.GetInfo()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.HasPrefix(err.Error(), "loading the embedded catalog: ") {
					t.Fatalf("GetInfo() = %v, want %v wrapped", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "toy" || got.Version != "1.2.3" || !slices.Equal(got.APIVersions, []string{pluginapi.APIVersion}) ||
				!slices.Equal(got.Capabilities, info.Capabilities) || got.ConfigSchema != info.ConfigSchema ||
				!strings.HasPrefix(got.Catalog.Source, "test catalog: hand-written") || got.Catalog.GeneratedAt.IsZero() {
				t.Errorf("GetInfo() = %+v", got)
			}
		})
	}
}
