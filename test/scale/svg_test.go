package scale

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSeriesPoints(t *testing.T) {
	s := Series{Name: "mock", Running: []time.Duration{2 * time.Second, 500 * time.Millisecond}}
	want := [][2]float64{{0, 0}, {0.5, 0}, {0.5, 1}, {2, 1}, {2, 2}}
	if diff := cmp.Diff(want, s.Points()); diff != "" {
		t.Errorf("Points (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][2]float64{{0, 0}}, Series{}.Points()); diff != "" {
		t.Errorf("Points of no pods (-want +got):\n%s", diff)
	}
}

func TestNiceCeil(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{0, 1}, {0.3, 0.5}, {1, 1}, {1.2, 2}, {2.2, 2.5}, {3, 5}, {7, 10}, {100, 100}, {101, 200}, {220, 250}, {300, 500}, {1000, 1000},
	}
	for _, tt := range tests {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestWriteSVG checks that the plot is well-formed XML with one polyline
// per series, its points inside the axes, the legend's names escaped, and
// the axes scaled to round numbers.
func TestWriteSVG(t *testing.T) {
	series := []Series{
		{Name: "virtual-kubelet mock", Running: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{Name: "kip <light cells>", Running: []time.Duration{4 * time.Second}},
	}
	var b strings.Builder
	if err := WriteSVG(&b, "100 pods", series); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("the plot is not XML: %v\n%s", err, b.String())
	}
	if len(doc.Polylines) != len(series) {
		t.Fatalf("%d polylines, want %d", len(doc.Polylines), len(series))
	}
	for i, pl := range doc.Polylines {
		if got, want := len(strings.Fields(pl.Points)), len(series[i].Points()); got != want {
			t.Errorf("polyline %d has %d points, want %d", i, got, want)
		}
	}
	// The first series ends at (3 s, 3 pods) on axes up to 5 s and 5 pods.
	last := strings.Fields(doc.Polylines[0].Points)[6]
	if want := num(marginL+3.0/5*innerW) + "," + num(marginT+innerH-3.0/5*innerH); last != want {
		t.Errorf("the first series ends at %s, want %s", last, want)
	}
	for _, want := range []string{"100 pods", "kip <light cells>", "5", "seconds since the first create", "pods Running"} {
		found := false
		for _, text := range doc.Texts {
			found = found || text == want
		}
		if !found {
			t.Errorf("no text %q in %q", want, doc.Texts)
		}
	}
}
