package scale

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// CounterSums reads Prometheus' text format (kip's admin /metrics) and
// returns, for each metric named in by, the sum of its samples over every
// label, and, when by names a label for it, the sum per value of that
// label too, keyed "name{label=value}": kip_plugin_calls_total in all and
// by method.
func CounterSums(text string, by map[string]string) (map[string]float64, error) {
	out := map[string]float64{}
	for name := range by {
		out[name] = 0
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := cutValue(line)
		if !ok {
			return nil, fmt.Errorf("reading the metrics: line %q has no value", line)
		}
		name, labels, _ := strings.Cut(series, "{")
		label, wanted := by[name]
		if !wanted {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("reading the metrics: line %q: %w", line, err)
		}
		out[name] += v
		if label == "" {
			continue
		}
		if lv, ok := labelValue(strings.TrimSuffix(labels, "}"), label); ok {
			out[name+"{"+label+"="+lv+"}"] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the metrics: %w", err)
	}
	return out, nil
}

// cutValue splits a sample line into its series and its value (a
// timestamp after the value, which kip does not write, is dropped).
func cutValue(line string) (series, value string, ok bool) {
	end := strings.LastIndexByte(line, '}') + 1 // 0 without labels
	fields := strings.Fields(line[end:])
	if end == 0 {
		if len(fields) < 2 {
			return "", "", false
		}
		return fields[0], fields[1], true
	}
	if len(fields) < 1 {
		return "", "", false
	}
	return line[:end], fields[0], true
}

// labelValue finds label's value in labels (`method="Launch",outcome="ok"`,
// without braces); kip's label values hold no comma or quote.
func labelValue(labels, label string) (string, bool) {
	for pair := range strings.SplitSeq(labels, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && k == label {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}
