// Package expansion is the kubelet's $(VAR) syntax, shared by the host
// (which expands env values when it resolves a pod) and the cell agent
// (which expands command, args and subPathExpr): both sides must agree on
// it exactly. It imports only the standard library.
package expansion

import "strings"

// Expand replaces $(NAME) with the value of a defined variable and $$ with
// a literal $; a reference to an undefined variable, or an unterminated
// one, stays as written, as on a kubelet.
func Expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
