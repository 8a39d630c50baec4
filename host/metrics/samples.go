package metrics

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Samples is every sample g gathers, by its name and labels as the text
// format writes them (`kip_cells{phase="Running"}`, labels in name order);
// a histogram by its _count and _sum. For tests and tools that read a
// value or two.
func Samples(g prometheus.Gatherer) (map[string]float64, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering metrics: %w", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := make([]string, 0, len(s.GetLabel()))
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			series := ""
			if len(labels) > 0 {
				series = "{" + strings.Join(labels, ",") + "}"
			}
			name := f.GetName()
			switch {
			case s.GetCounter() != nil:
				out[name+series] = s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				out[name+series] = s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				out[name+"_count"+series] = float64(s.GetHistogram().GetSampleCount())
				out[name+"_sum"+series] = s.GetHistogram().GetSampleSum()
			}
		}
	}
	return out, nil
}
