package setting

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestError(t *testing.T) {
	if got := Errorf("capacity.cpu", "%q is not a quantity", "lots").Error(); got != `capacity.cpu: "lots" is not a quantity` {
		t.Errorf("Error() = %q", got)
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{name: "nil", err: nil, want: nil},
		{name: "one", err: Errorf("taint", "bad"), want: []string{"taint"}},
		{name: "wrapped", err: fmt.Errorf("node: %w", Errorf("taint", "bad")), want: []string{"taint"}},
		{name: "joined, nested", err: errors.Join(Errorf("a", "x"), errors.Join(Errorf("b", "y"), errors.New("no key"))), want: []string{"a", "b", ""}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Keys(tt.err)); diff != "" {
			t.Errorf("%s: Keys (-want +got):\n%s", tt.name, diff)
		}
	}
}
