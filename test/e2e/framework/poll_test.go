package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPoll(t *testing.T) {
	boom := errors.New("boom")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n", errors.New("changed"))
	tests := []struct {
		name    string
		cond    func(calls int) (bool, error)
		wantErr string
		minCall int
	}{
		{name: "true at once", cond: func(int) (bool, error) { return true, nil }},
		{name: "true on the third call", cond: func(n int) (bool, error) { return n >= 3, nil }, minCall: 3},
		{name: "a hard error stops at once", cond: func(int) (bool, error) { return false, boom }, wantErr: "boom"},
		{name: "transient errors are retried", cond: func(n int) (bool, error) {
			if n < 2 {
				return false, conflict
			}
			return true, nil
		}, minCall: 2},
		{name: "never true times out", cond: func(int) (bool, error) { return false, nil }, wantErr: "timed out after 500ms"},
		{name: "timeout names the last transient error", cond: func(int) (bool, error) { return false, conflict }, wantErr: "last error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Poll(t.Context(), 500*time.Millisecond, func(context.Context) (bool, error) {
				calls++
				return tt.cond(calls)
			})
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Poll = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Poll = %v, want %q", err, tt.wantErr)
			}
			if calls < tt.minCall {
				t.Errorf("cond called %d times, want at least %d", calls, tt.minCall)
			}
		})
	}
}
