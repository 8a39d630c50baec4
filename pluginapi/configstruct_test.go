package pluginapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sample is a configuration struct with every kind of field DecodeConfig
// and ConfigSchema take.
type sample struct {
	Name  string            `json:"name" required:"true" doc:"The name." pattern:"^[a-z]+$"`
	Count int64             `json:"count,omitempty" minimum:"1" maximum:"9"`
	Price *float64          `json:"price,omitempty" exclusiveMinimum:"0"`
	On    bool              `json:"on,omitempty"`
	Mode  string            `json:"mode,omitempty" enum:"a,b" minLength:"1"`
	Tags  map[string]string `json:"tags,omitempty" maxLength:"5" maxProperties:"3"`
	List  []string          `json:"list,omitempty" pattern:"^x" minItems:"1" uniqueItems:"true"`
	Inner *sampleInner      `json:"inner,omitempty" doc:"An object."`
	Value sampleInner       `json:"value"`
	Items []sampleItem      `json:"items,omitempty" minItems:"1"`
	sampleOld
	Skipped string `json:"-"`
	NoTag   string
}

type sampleInner struct {
	A string `json:"a,omitempty"`
	B int    `json:"b,omitempty"`
}

func (sampleInner) ConfigAlternatives() (oneOf, anyOf [][]string) {
	return [][]string{{"a"}, {"b"}}, nil
}

type sampleItem struct {
	ID string `json:"id" required:"true"`
}

type sampleOld struct {
	Old string `json:"old,omitempty" deprecated:"true"`
}

func TestDecodeConfig(t *testing.T) {
	price := 0.5
	tests := []struct {
		name, raw string
		want      sample // when key is ""
		key, msg  string
	}{
		{name: "every key", raw: `{"name":"n","count":3,"price":0.5,"on":true,"mode":"a","tags":{"k":"v"},"list":["x"],
			"inner":{"a":"i"},"value":{"b":2},"items":[{"id":"1"},{"id":"2"}],"old":"o","NoTag":"t"}`,
			want: sample{Name: "n", Count: 3, Price: &price, On: true, Mode: "a", Tags: map[string]string{"k": "v"}, List: []string{"x"},
				Inner: &sampleInner{A: "i"}, Value: sampleInner{B: 2}, Items: []sampleItem{{ID: "1"}, {ID: "2"}}, sampleOld: sampleOld{Old: "o"}, NoTag: "t"}},
		{name: "nothing", raw: ``},
		{name: "blank", raw: " \n\t"},
		{name: "null", raw: ` null `},
		{name: "empty object", raw: `{}`},
		{name: "a nested null is {}", raw: `{"inner":null,"value":null}`, want: sample{Inner: &sampleInner{}}},
		{name: "an array of objects null", raw: `{"items":null,"price":null}`},
		{name: "an empty array of objects", raw: `{"items":[]}`, want: sample{Items: []sampleItem{}}},
		{name: "an array element null is {}", raw: `{"items":[null]}`, want: sample{Items: []sampleItem{{}}}},
		{name: "a list", raw: `[1]`, key: "plugin.config", msg: "must be a JSON object"},
		{name: "a string", raw: `"abc"`, key: "plugin.config", msg: "must be a JSON object"},
		{name: "not JSON", raw: `name: x`, key: "plugin.config", msg: "must be a JSON object"},
		{name: "unknown key", raw: `{"nameX":"a"}`, key: "nameX", msg: "unknown key"},
		{name: "the first unknown key in order", raw: `{"zz":1,"aa":2}`, key: "aa", msg: "unknown key"},
		{name: "a skipped field", raw: `{"Skipped":"x"}`, key: "Skipped", msg: "unknown key"},
		{name: "string", raw: `{"name":7}`, key: "name", msg: "must be a string"},
		{name: "integer", raw: `{"count":"3"}`, key: "count", msg: "must be an integer"},
		{name: "integer fraction", raw: `{"count":1.5}`, key: "count", msg: "must be an integer"},
		{name: "number", raw: `{"price":"x"}`, key: "price", msg: "must be a number"},
		{name: "bool", raw: `{"on":"yes"}`, key: "on", msg: "must be true or false"},
		{name: "map", raw: `{"tags":{"k":1}}`, key: "tags", msg: "must be an object of strings"},
		{name: "list of strings", raw: `{"list":"x"}`, key: "list", msg: "must be an array of strings"},
		{name: "object", raw: `{"inner":"x"}`, key: "inner", msg: "must be a JSON object"},
		{name: "object value", raw: `{"value":[1]}`, key: "value", msg: "must be a JSON object"},
		{name: "nested unknown key", raw: `{"inner":{"c":1}}`, key: "inner.c", msg: "unknown key"},
		{name: "nested type", raw: `{"value":{"b":"x"}}`, key: "value.b", msg: "must be an integer"},
		{name: "array of objects", raw: `{"items":{}}`, key: "items", msg: "must be an array"},
		{name: "array element", raw: `{"items":[7]}`, key: "items[0]", msg: "must be a JSON object"},
		{name: "array element key", raw: `{"items":[{"id":"a"},{"id":"b","x":1}]}`, key: "items[1].x", msg: "unknown key"},
		{name: "embedded", raw: `{"old":1}`, key: "old", msg: "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got sample
			err := DecodeConfig([]byte(tt.raw), &got)
			if tt.key == "" {
				if err != nil {
					t.Fatalf("DecodeConfig(%s) = %v", tt.raw, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("DecodeConfig(%s) = %+v, want %+v", tt.raw, got, tt.want)
				}
				return
			}
			var ic *InvalidConfigError
			if !errors.As(err, &ic) || ic.Key != tt.key || ic.Message != tt.msg {
				t.Errorf("DecodeConfig(%s) = %v, want InvalidConfig %s: %s", tt.raw, err, tt.key, tt.msg)
			}
		})
	}
}

// Decoding over a value keeps what the configuration does not set.
func TestDecodeConfigKeepsWhatIsNotSet(t *testing.T) {
	got := sample{Name: "kept", Count: 4}
	if err := DecodeConfig([]byte(`{"count":5}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "kept" || got.Count != 5 {
		t.Errorf("got name %q count %d, want kept and 5", got.Name, got.Count)
	}
}

// A struct DecodeConfig cannot decode into is the plugin's mistake, not
// the operator's: a plain error, whatever the configuration.
func TestDecodeConfigRefusesWhatItCannotDecodeInto(t *testing.T) {
	type counts struct {
		Counts map[string]int `json:"counts"`
	}
	type twice struct {
		A string // key A, by its name
		B string `json:"A,omitempty"`
	}
	var s sample
	for _, tt := range []struct {
		name        string
		into        any
		schemaFails bool // ConfigSchema fails too
	}{
		{"not a pointer", s, false},
		{"a nil pointer", (*sample)(nil), true},
		{"not a struct", new(string), true},
		{"a field of an unsupported type", &counts{}, true},
		{"a key twice", &twice{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeConfig([]byte(`{}`), tt.into)
			if err == nil || IsInvalidConfig(err) || !strings.HasPrefix(err.Error(), "decoding the config: ") {
				t.Errorf("DecodeConfig into %T = %v, want a plain error", tt.into, err)
			}
			if _, err := ConfigSchema("t", tt.into); (err != nil) != tt.schemaFails {
				t.Errorf("ConfigSchema of %T = %v, want an error: %v", tt.into, err, tt.schemaFails)
			}
		})
	}
}

func TestConfigSchema(t *testing.T) {
	defaults := &sample{Count: 3, Mode: "a", Inner: &sampleInner{A: "x"}, Value: sampleInner{B: 2}}
	got, err := ConfigSchema("sample configuration", defaults)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "sample configuration",
  "type": "object",
  "additionalProperties": false,
  "required": ["name"],
  "properties": {
    "name": {"description": "The name.", "type": "string", "pattern": "^[a-z]+$"},
    "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
    "price": {"type": "number", "exclusiveMinimum": 0},
    "on": {"type": "boolean", "default": false},
    "mode": {"type": "string", "enum": ["a", "b"], "minLength": 1, "default": "a"},
    "tags": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 5}, "maxProperties": 3},
    "list": {"type": "array", "items": {"type": "string", "pattern": "^x"}, "minItems": 1, "uniqueItems": true},
    "inner": {
      "description": "An object.",
      "type": "object",
      "additionalProperties": false,
      "properties": {"a": {"type": "string", "default": "x"}, "b": {"type": "integer"}},
      "oneOf": [{"required": ["a"]}, {"required": ["b"]}]
    },
    "value": {
      "type": "object",
      "additionalProperties": false,
      "properties": {"a": {"type": "string"}, "b": {"type": "integer", "default": 2}},
      "oneOf": [{"required": ["a"]}, {"required": ["b"]}]
    },
    "items": {
      "type": "array",
      "minItems": 1,
      "items": {"type": "object", "additionalProperties": false, "required": ["id"], "properties": {"id": {"type": "string"}}}
    },
    "old": {"type": "string", "deprecated": true},
    "NoTag": {"type": "string"}
  }
}`
	var gotJSON, wantJSON any
	if err := json.Unmarshal([]byte(got), &gotJSON); err != nil {
		t.Fatalf("the schema is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &wantJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotJSON, wantJSON) {
		t.Errorf("schema:\n%s\nwant the same JSON as:\n%s", got, want)
	}
	if again := MustConfigSchema("sample configuration", *defaults); again != got {
		t.Errorf("a second rendering differs:\n%s\nthen\n%s", got, again)
	}
	if !strings.HasPrefix(got, "{\n  \"$schema\"") || !strings.HasSuffix(got, "}\n") {
		t.Errorf("the schema is not indented JSON with sorted keys:\n%s", got)
	}
}

// A tag that is not a JSON literal where one is wanted, or a pattern that
// does not compile, fails the rendering, and MustConfigSchema panics on it.
func TestConfigSchemaRefusesABadTag(t *testing.T) {
	type literal struct {
		N int `json:"n" minimum:"one"`
	}
	type pattern struct {
		S []string `json:"s" pattern:"^(a"`
	}
	for _, tt := range []struct {
		config any
		tag    string
	}{
		{literal{}, `minimum:"one"`},
		{pattern{}, `pattern:"^(a"`},
	} {
		if _, err := ConfigSchema("bad", tt.config); err == nil || !strings.Contains(err.Error(), tt.tag) {
			t.Errorf("ConfigSchema(%T) = %v, want an error naming %s", tt.config, err, tt.tag)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustConfigSchema(%T) did not panic", tt.config)
				}
			}()
			MustConfigSchema("bad", tt.config)
		}()
	}
}

func TestConfigPattern(t *testing.T) {
	type deep struct {
		Items []sampleItemPattern `json:"items"`
	}
	tests := []struct {
		key, want string // want "" for a panic
	}{
		{"name", "^[a-z]+$"},
		{"list", "^x"},
		{"inner.a", ""},
		{"count", ""},
		{"nameX", ""},
		{"name.x", ""},
		{"deep.items.code", "^[0-9]+$"},
		{"deep.items.none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			var got string
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				if strings.HasPrefix(tt.key, "deep.") {
					got = ConfigPattern(&deep{}, strings.TrimPrefix(tt.key, "deep.")).String()
				} else {
					got = ConfigPattern(sample{}, tt.key).String()
				}
				return false
			}()
			if tt.want == "" {
				if !panicked {
					t.Errorf("ConfigPattern(%s) = %q, want a panic", tt.key, got)
				}
				return
			}
			if panicked || got != tt.want {
				t.Errorf("ConfigPattern(%s) = %q (panicked %v), want %q", tt.key, got, panicked, tt.want)
			}
		})
	}
}

type sampleItemPattern struct {
	Code string `json:"code" pattern:"^[0-9]+$"`
	None string `json:"none"`
}
