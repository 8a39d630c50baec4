package identity

import "testing"

func TestAudience(t *testing.T) {
	tests := []struct{ cluster, cell, want string }{
		{"prod", "kip-0d5f", "kipcell.io/join/prod/kip-0d5f"},
		{"team a/b", "kip-1", "kipcell.io/join/team%20a%2Fb/kip-1"},
		{"", "kip-1", "kipcell.io/join//kip-1"},
	}
	for _, tt := range tests {
		if got := Audience(tt.cluster, tt.cell); got != tt.want {
			t.Errorf("Audience(%q, %q) = %q, want %q", tt.cluster, tt.cell, got, tt.want)
		}
	}
	if Audience("a/b", "c") == Audience("a", "b/c") {
		t.Error("two clusters' cells share an audience")
	}
}
