package gcesim

import (
	"regexp"
	"strconv"
	"strings"
)

// filterTerm is one comparison of a list filter: `labels.cell = "c-1"`,
// `status != RUNNING`, `labels.pool:*` (the label is set), `name:cell`
// (contains).
var filterTerm = regexp.MustCompile(`^\(?\s*([A-Za-z][\w.-]*)\s*(!=|=|:)\s*("(?:[^"\\]|\\.)*"|[^\s()]+)\s*\)?`)

// instanceFields are the fields an instances list filter may name, and
// labels.<key> ("labels"); any other is refused, so a client that relies
// on one the simulator does not evaluate finds out.
var instanceFields = map[string]bool{"name": true, "status": true, "zone": true, "machineType": true, "labels": true}

// parseFilter reads GCE's list filter: comparisons joined by spaces or
// AND (all must hold) or by OR (one must hold), each optionally in
// parentheses, of the known fields ("labels" allows labels.<key>). A
// filter that mixes AND and OR is refused: GCE's precedence between them
// is not documented, and the simulator refuses what it cannot evaluate as
// GCE does. It returns the predicate over a resource's fields, or GCE's
// invalid error.
func parseFilter(expr string, known map[string]bool) (func(field func(string) (string, bool)) bool, error) {
	type term struct{ field, op, value string }
	var terms []term
	var and, or bool
	rest := strings.TrimSpace(expr)
	for rest != "" {
		if len(terms) > 0 {
			switch {
			case strings.HasPrefix(rest, "OR "):
				or, rest = true, strings.TrimSpace(rest[len("OR "):])
			case strings.HasPrefix(rest, "AND "):
				and, rest = true, strings.TrimSpace(rest[len("AND "):])
			default:
				and = true
			}
			if and && or {
				return nil, invalid("filter", expr, "Invalid list filter expression.")
			}
		}
		m := filterTerm.FindStringSubmatch(rest)
		if m == nil {
			return nil, invalid("filter", expr, "Invalid list filter expression.")
		}
		field, value := m[1], m[3]
		label := strings.HasPrefix(field, "labels.")
		if label && !known["labels"] || !label && !known[field] {
			return nil, invalid("filter", expr, "Invalid list filter expression.")
		}
		if strings.HasPrefix(value, `"`) {
			v, err := strconv.Unquote(value)
			if err != nil {
				return nil, invalid("filter", expr, "Invalid list filter expression.")
			}
			value = v
		}
		terms = append(terms, term{field, m[2], value})
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	return func(field func(string) (string, bool)) bool {
		for _, t := range terms {
			v, ok := field(t.field)
			var hold bool
			switch t.op {
			case "=":
				hold = ok && v == t.value
			case "!=":
				hold = !ok || v != t.value
			case ":":
				hold = ok && (t.value == "*" || strings.Contains(v, t.value))
			}
			if or && hold {
				return true
			}
			if !or && !hold {
				return false
			}
		}
		return !or
	}, nil
}
