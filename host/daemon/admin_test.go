package daemon

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
)

func TestLateCheck(t *testing.T) {
	var l lateCheck
	r := httptest.NewRequest("GET", "/readyz", nil)
	if err := l.run(r); err == nil || err.Error() != "not started" {
		t.Errorf("before set: %v, want not started", err)
	}
	failed := errors.New("plugin unreachable")
	l.set(func(context.Context) error { return failed })
	if err := l.run(r); !errors.Is(err, failed) {
		t.Errorf("after set: %v, want the check's error", err)
	}
}
