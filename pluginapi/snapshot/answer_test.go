package snapshot

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListAndDescribe(t *testing.T) {
	v := New(func(context.Context) (map[string]string, error) {
		return map[string]string{"i-2": "running", "i-1": "pending"}, nil
	}, time.Now, time.Minute)
	report := strings.ToUpper
	got, err := List(t.Context(), v, time.Minute, report)
	if err != nil || !slices.Equal(got, []string{"PENDING", "RUNNING"}) {
		t.Errorf("List = %v, %v; want [PENDING RUNNING] by ID", got, err)
	}

	var asked [][]string
	lookup := func(_ context.Context, missing []string) ([]string, error) {
		asked = append(asked, missing)
		return []string{"OTHER"}, nil
	}
	got, err = Describe(t.Context(), v, time.Minute, []string{"i-2", "x-9", "i-2", "x-8"}, report, lookup)
	if err != nil || !slices.Equal(got, []string{"RUNNING", "OTHER"}) {
		t.Errorf("Describe = %v, %v; want the snapshot's, then the lookup's", got, err)
	}
	if len(asked) != 1 || !slices.Equal(asked[0], []string{"x-8", "x-9"}) {
		t.Errorf("lookup asked for %v, want once for [x-8 x-9]", asked)
	}
	asked = nil
	if got, err := Describe(t.Context(), v, time.Minute, []string{"i-1"}, report, lookup); err != nil || !slices.Equal(got, []string{"PENDING"}) || asked != nil {
		t.Errorf("Describe of a known ID = %v, %v (lookup asked %v); want [PENDING] without a lookup", got, err, asked)
	}
	failed := errors.New("throttled")
	if _, err := Describe(t.Context(), v, time.Minute, []string{"x-1"}, report, func(context.Context, []string) ([]string, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("Describe with a failed lookup = %v, want it", err)
	}
	if got, err := Describe(t.Context(), v, time.Minute, nil, report, lookup); err != nil || len(got) != 0 {
		t.Errorf("Describe of nothing = %v, %v", got, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := List(ctx, v, time.Minute, report); !errors.Is(err, context.Canceled) {
		t.Errorf("List after its ctx ended = %v", err)
	}
}
