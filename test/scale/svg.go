package scale

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Series is one line of a plot: pods Running over time for one node.
type Series struct {
	Name string
	// Running holds, for each pod, how long after the burst's first
	// create it was first seen Running.
	Running []time.Duration
}

// Points returns s's step curve: (0, 0), then for each pod in the order
// they turned Running, the time and the number Running just before and
// at it.
func (s Series) Points() [][2]float64 {
	times := slices.Sorted(slices.Values(s.Running))
	pts := [][2]float64{{0, 0}}
	for i, t := range times {
		x := t.Seconds()
		pts = append(pts, [2]float64{x, float64(i)}, [2]float64{x, float64(i + 1)})
	}
	return pts
}

// Plot sizes, in SVG user units.
const (
	plotW, plotH         = 640, 360
	marginL, marginR     = 60, 150
	marginT, marginB     = 30, 45
	innerW, innerH       = plotW - marginL - marginR, plotH - marginT - marginB
	ticks                = 5
	legendX, legendLineH = plotW - marginR + 15, 18
)

// colors are the series' colours, in order.
var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// WriteSVG writes a plot of pods Running (y) over seconds since the first
// create (x) of every series, as an SVG of polylines with axes and a
// legend, to w: no dependency, and a file that any browser or GitHub
// shows.
func WriteSVG(w io.Writer, title string, series []Series) error {
	maxX, maxY := 0.0, 0.0
	for _, s := range series {
		for _, p := range s.Points() {
			maxX, maxY = max(maxX, p[0]), max(maxY, p[1])
		}
	}
	maxX, maxY = niceCeil(maxX), niceCeil(maxY)
	x := func(v float64) float64 { return marginL + v/maxX*innerW }
	y := func(v float64) float64 { return marginT + innerH - v/maxY*innerH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s</text>`+"\n", marginL, html.EscapeString(title))
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="black"/>`+"\n", marginL, marginT, marginT+innerH, marginL+innerW)
	for i := 0; i <= ticks; i++ {
		vx, vy := maxX*float64(i)/ticks, maxY*float64(i)/ticks
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(x(vx)), marginT+innerH+16, num(vx))
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-6, num(y(vy)), num(vy))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds since the first create</text>`+"\n", marginL+innerW/2, plotH-8)
	fmt.Fprintf(&b, `<text x="14" y="%d" text-anchor="middle" transform="rotate(-90 14 %d)">pods Running</text>`+"\n", marginT+innerH/2, marginT+innerH/2)
	for i, s := range series {
		color := colors[i%len(colors)]
		var pts []string
		for _, p := range s.Points() {
			pts = append(pts, num(x(p[0]))+","+num(y(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		ly := marginT + 10 + i*legendLineH
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", legendX, ly, legendX+20, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendX+26, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	return nil
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten, so that the
// axes' ticks are round numbers; 1 for nothing to plot.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// num formats v with at most two decimals and no trailing zeros.
func num(v float64) string {
	s := strings.TrimRight(fmt.Sprintf("%.2f", v), "0")
	return strings.TrimSuffix(s, ".")
}
