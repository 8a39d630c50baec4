package ratelimit

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestConfigCheck(t *testing.T) {
	defaults := Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20}
	tests := []struct {
		name     string
		c        Config
		want     Config
		key, msg string // the InvalidConfig expected, if any
	}{
		{name: "nothing set: the defaults", want: defaults},
		{name: "one set", c: Config{MutatePerSecond: 0.5}, want: Config{ReadPerSecond: 10, MutatePerSecond: 0.5, Burst: 20}},
		{name: "every one set", c: Config{ReadPerSecond: 1, MutatePerSecond: 2, Burst: 3}, want: Config{ReadPerSecond: 1, MutatePerSecond: 2, Burst: 3}},
		{name: "read negative", c: Config{ReadPerSecond: -1}, key: "rateLimit.readPerSecond", msg: "must be a positive number of calls per second"},
		{name: "read infinite", c: Config{ReadPerSecond: math.Inf(1)}, key: "rateLimit.readPerSecond", msg: "must be a positive number of calls per second"},
		{name: "mutate NaN", c: Config{MutatePerSecond: math.NaN()}, key: "rateLimit.mutatePerSecond", msg: "must be a positive number of calls per second"},
		{name: "burst negative", c: Config{Burst: -2}, key: "rateLimit.burst", msg: "must be a positive number of calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Check("rateLimit", defaults)
			if tt.key == "" {
				if err != nil || got != tt.want {
					t.Errorf("Check = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var ic *pluginapi.InvalidConfigError
			if !errors.As(err, &ic) || ic.Key != tt.key || ic.Message != tt.msg {
				t.Errorf("Check = %v, want InvalidConfig %s: %s", err, tt.key, tt.msg)
			}
		})
	}
}

// The buckets are the configured ones: a burst of 2 lets two calls of each
// kind through at once, and the third waits as long as its rate says.
func TestConfigBuckets(t *testing.T) {
	clock := newFakeClock()
	read, mutate := Config{ReadPerSecond: 4, MutatePerSecond: 1, Burst: 2}.Buckets(clock.Now, nil)
	for name, tc := range map[string]struct {
		b    *Bucket
		wait time.Duration
	}{"read": {read, 250 * time.Millisecond}, "mutate": {mutate, time.Second}} {
		for range 2 {
			if _, d := tc.b.Reserve(); d != 0 {
				t.Errorf("%s: a call of the burst waits %s", name, d)
			}
		}
		if _, d := tc.b.Reserve(); d != tc.wait {
			t.Errorf("%s: the third call waits %s, want %s", name, d, tc.wait)
		}
	}
}
