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
		{`null`, "rate", "must be a JSON object"},
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
