package expansion

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "one", "EMPTY": "", "B": "$(A)"}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "one"},
		{"x-$(A)-y", "x-one-y"},
		{"$(A)$(A)", "oneone"},
		{"$(EMPTY)end", "end"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$one"},
		{"cost: $5", "cost: $5"},
		{"trailing $", "trailing $"},
		{"$(A", "$(A"},
		{"$(B)", "$(A)"}, // no recursive expansion
	}
	for _, tt := range tests {
		if got := Expand(tt.in, vars); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
