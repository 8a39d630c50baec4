package ratelimit

import (
	"context"
	"math"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Config is a plugin's rateLimit setting, for its configuration struct
// (pluginapi.DecodeConfig, pluginapi.ConfigSchema): two buckets, one for
// the calls that read and one for the calls that change something, each
// refilled at its rate and holding at most Burst tokens. A field left zero
// takes the plugin's default (Check); the plugin's defaults value sets its
// own numbers, which its schema then shows.
type Config struct {
	ReadPerSecond   float64 `json:"readPerSecond,omitempty" exclusiveMinimum:"0" doc:"Calls a second that read (list, describe, get, operation polls)."`
	MutatePerSecond float64 `json:"mutatePerSecond,omitempty" exclusiveMinimum:"0" doc:"Calls a second that change something (launch, terminate)."`
	Burst           int     `json:"burst,omitempty" minimum:"1" doc:"Tokens each bucket holds: calls that go out at once before the rates apply."`
}

// Check checks c, the value of key (such as "rateLimit"), and fills what
// it leaves zero from defaults. Its InvalidConfig errors name the field's
// key ("rateLimit.burst").
func (c Config) Check(key string, defaults Config) (Config, error) {
	if err := CheckPerSecond(key+".readPerSecond", c.ReadPerSecond); err != nil {
		return Config{}, err
	}
	if err := CheckPerSecond(key+".mutatePerSecond", c.MutatePerSecond); err != nil {
		return Config{}, err
	}
	if c.Burst < 0 {
		return Config{}, pluginapi.NewInvalidConfig(key+".burst", "must be a positive number of calls")
	}
	out := defaults
	if c.ReadPerSecond != 0 {
		out.ReadPerSecond = c.ReadPerSecond
	}
	if c.MutatePerSecond != 0 {
		out.MutatePerSecond = c.MutatePerSecond
	}
	if c.Burst != 0 {
		out.Burst = c.Burst
	}
	return out, nil
}

// CheckPerSecond checks a rate of calls a second, the value of key: zero
// (the default) or positive and finite.
func CheckPerSecond(key string, perSecond float64) error {
	if perSecond < 0 || math.IsInf(perSecond, 0) || math.IsNaN(perSecond) {
		return pluginapi.NewInvalidConfig(key, "must be a positive number of calls per second")
	}
	return nil
}

// Buckets returns the two full buckets c describes, on the clock now and
// sleep (nil: time.Now and Sleep, as for New).
func (c Config) Buckets(now func() time.Time, sleep func(context.Context, time.Duration) error) (read, mutate *Bucket) {
	return New(c.ReadPerSecond, c.Burst, now, sleep), New(c.MutatePerSecond, c.Burst, now, sleep)
}
