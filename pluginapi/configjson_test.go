package pluginapi

import (
	"errors"
	"testing"
)

func TestDecodeConfigObject(t *testing.T) {
	var (
		name  string
		count int64
		price *float64
		tags  map[string]string
		on    bool
	)
	fields := map[string]any{"name": &name, "count": &count, "price": &price, "tags": &tags, "on": &on}
	tests := []struct {
		raw, key, reason string
	}{
		{`{"name":"a","count":3,"price":0.5,"tags":{"k":"v"},"on":true}`, "", ""},
		{`[1]`, "rate", "must be a JSON object"},
		{`"abc"`, "rate", "must be a JSON object"},
		{`{"nameX":"a"}`, "rate.nameX", "unknown key"},
		{`{"zz":1,"aa":2}`, "rate.aa", "unknown key"},
		{`{"count":"3"}`, "rate.count", "must be an integer"},
		{`{"price":"x"}`, "rate.price", "must be a number"},
		{`{"tags":{"k":1}}`, "rate.tags", "must be an object of strings"},
		{`{"on":"yes"}`, "rate.on", "must be true or false"},
	}
	for _, tt := range tests {
		err := DecodeConfigObject([]byte(tt.raw), "rate.", fields)
		if tt.key == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.raw, err)
			}
			if name != "a" || count != 3 || price == nil || *price != 0.5 || tags["k"] != "v" || !on {
				t.Errorf("decoded name=%q count=%d price=%v tags=%v on=%v", name, count, price, tags, on)
			}
			continue
		}
		var ic *InvalidConfigError
		if !errors.As(err, &ic) || ic.Key != tt.key || ic.Message != tt.reason {
			t.Errorf("%s: got %v, want InvalidConfig %s: %s", tt.raw, err, tt.key, tt.reason)
		}
	}
}

// No configuration is an empty one: what kip sends when kip.yaml has no
// plugin.config. The whole configuration, when it is not an object, is
// named as kip.yaml names it.
func TestDecodeConfigObjectWhole(t *testing.T) {
	tests := []struct {
		name string
		raw  []byte
		key  string // "" for success
	}{
		{"nil", nil, ""},
		{"zero length", []byte{}, ""},
		{"blank", []byte(" \n\t"), ""},
		{"null", []byte("null"), ""},
		{"null with spaces", []byte(" null\n"), ""},
		{"empty object", []byte("{}"), ""},
		{"a string", []byte(`"abc"`), "plugin.config"},
		{"a list", []byte(`["a"]`), "plugin.config"},
		{"a number", []byte(`3`), "plugin.config"},
		{"not JSON", []byte(`region: x`), "plugin.config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			region := "default"
			err := DecodeConfigObject(tt.raw, "", map[string]any{"region": &region})
			if tt.key == "" {
				if err != nil || region != "default" {
					t.Errorf("DecodeConfigObject(%q) = %v, region %q; want success with every default", tt.raw, err, region)
				}
				return
			}
			var ic *InvalidConfigError
			if !errors.As(err, &ic) || ic.Key != tt.key {
				t.Errorf("DecodeConfigObject(%q) = %v, want InvalidConfig key %q", tt.raw, err, tt.key)
			}
		})
	}
	var n int
	if err := DecodeConfigObject([]byte("null"), "rateLimit.", map[string]any{"burst": &n}); err != nil {
		t.Errorf("a nested null = %v, want it taken as {}", err)
	}
}
