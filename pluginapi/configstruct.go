package pluginapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// ConfigAlternatives is implemented by a configuration struct whose object
// requires one of several sets of keys. ConfigSchema renders oneOf (exactly
// one set is present) and anyOf (at least one) from it, each set as
// {"required": [...]}. DecodeConfig does not check them.
type ConfigAlternatives interface {
	// ConfigAlternatives returns the sets of keys of which exactly one
	// (oneOf) and at least one (anyOf) must be present; nil for none.
	ConfigAlternatives() (oneOf, anyOf [][]string)
}

// DecodeConfig decodes raw, a plugin's configuration
// (ConfigureRequest.Config), into the struct into points to, strictly: an
// unknown key, a value of the wrong JSON type, and a nested object or
// array element that is not an object are InvalidConfig errors naming the
// key as the operator wrote it ("rateLimit.burst", "instanceTypes[2].name";
// ConfigKey for the whole configuration). Empty input and JSON null mean
// {} wherever an object is expected; JSON null leaves any other value as it
// was. Keys are checked in sorted order, so the same key is named first
// every time. Only keys and types are checked: ranges are the caller's.
// A struct DecodeConfig cannot decode into (a field of an unsupported
// type) is a plain error, a programming error.
func DecodeConfig(raw []byte, into any) error {
	v := reflect.ValueOf(into)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("decoding the config: %T is not a pointer to a struct", into)
	}
	if _, err := objectSchema(v.Elem().Type(), reflect.Value{}); err != nil {
		return fmt.Errorf("decoding the config: %w", err)
	}
	return decodeObject(raw, "", v.Elem())
}

// decodeObject decodes raw, the object at key, into the struct v.
func decodeObject(raw []byte, key string, v reflect.Value) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return NewInvalidConfig(cmp.Or(key, ConfigKey), "must be a JSON object")
	}
	fields, err := configFields(v.Type())
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		i := slices.IndexFunc(fields, func(f configField) bool { return f.key == k })
		if i < 0 {
			return NewInvalidConfig(subKey(key, k), "unknown key")
		}
		if err := decodeValue(obj[k], subKey(key, k), v.FieldByIndex(fields[i].index)); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue decodes raw, the value at key, into v.
func decodeValue(raw json.RawMessage, key string, v reflect.Value) error {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Struct:
		return decodeObject(raw, key, v)
	case isStructPointer(t):
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return decodeObject(raw, key, v.Elem())
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return NewInvalidConfig(key, "must be an array")
		}
		if items == nil { // null
			return nil
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, item := range items {
			if err := decodeObject(item, fmt.Sprintf("%s[%d]", key, i), s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		kind, _, _ := leafType(t)
		return NewInvalidConfig(key, "must be %s", kind)
	}
	return nil
}

// subKey is key k of the object at key, as the operator writes it.
func subKey(key, k string) string {
	if key == "" {
		return k
	}
	return key + "." + k
}

// configField is one key of a configuration struct.
type configField struct {
	key   string
	index []int // for reflect.Value.FieldByIndex, through embedded structs
	field reflect.StructField
}

// configFields lists t's keys in the order of its fields, an embedded
// struct's where it is embedded.
func configFields(t reflect.Type) ([]configField, error) {
	var out []configField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			inner, err := configFields(f.Type)
			if err != nil {
				return nil, err
			}
			for _, g := range inner {
				g.index = append([]int{i}, g.index...)
				out = append(out, g)
			}
			continue
		case !f.IsExported():
			continue
		}
		out = append(out, configField{key: cmp.Or(name, f.Name), index: []int{i}, field: f})
	}
	for i, f := range out {
		if slices.ContainsFunc(out[:i], func(g configField) bool { return g.key == f.key }) {
			return nil, fmt.Errorf("%s has key %q twice", t, f.key)
		}
	}
	return out, nil
}

func isStructPointer(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct
}

// leafType names the JSON type a field that is not an object wants, for
// messages ("a string"), and its JSON Schema type ("string"); ok is false
// for a type DecodeConfig does not take.
func leafType(t reflect.Type) (kind, schemaType string, ok bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string", "string", true
	case reflect.Bool:
		return "true or false", "boolean", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer", "integer", true
	case reflect.Float32, reflect.Float64:
		return "a number", "number", true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings", "array", true
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return "an object of strings", "object", true
		}
	}
	return "", "", false
}

// schemaDraft is the JSON Schema dialect ConfigSchema writes.
const schemaDraft = "https://json-schema.org/draft/2020-12/schema"

// ConfigSchema renders the JSON Schema (draft 2020-12) of a configuration
// struct, for GetInfoResponse.ConfigSchema: an object with the given title
// whose properties are the struct's keys (see DecodeConfig), described by
// their tags (listed in the package's documentation, under Configuration)
// and ConfigAlternatives, with no other properties. defaults is a struct
// or a pointer to one, holding the
// plugin's defaults: every field it sets is its key's "default". The
// output is indented JSON with its object keys sorted, the same for the
// same struct every time.
func ConfigSchema(title string, defaults any) (string, error) {
	v := reflect.ValueOf(defaults)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", fmt.Errorf("rendering the config schema: %T is not a struct or a pointer to one", defaults)
	}
	s, err := objectSchema(v.Type(), v)
	if err != nil {
		return "", fmt.Errorf("rendering the config schema: %w", err)
	}
	s["$schema"], s["title"] = schemaDraft, title
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return "", fmt.Errorf("rendering the config schema: %w", err)
	}
	return b.String(), nil
}

// MustConfigSchema is ConfigSchema for a package variable: it panics where
// ConfigSchema fails, on a struct it cannot render, which a plugin's first
// test run finds.
func MustConfigSchema(title string, defaults any) string {
	s, err := ConfigSchema(title, defaults)
	if err != nil {
		panic(err)
	}
	return s
}

// objectSchema is the schema of struct type t; def, when valid, is a
// value of t holding defaults.
func objectSchema(t reflect.Type, def reflect.Value) (map[string]any, error) {
	fields, err := configFields(t)
	if err != nil {
		return nil, err
	}
	props := map[string]any{}
	var required []string
	for _, f := range fields {
		var fdef reflect.Value
		if def.IsValid() {
			fdef = def.FieldByIndex(f.index)
		}
		p, err := fieldSchema(f.field.Type, f.field.Tag, fdef)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t, f.field.Name, err)
		}
		props[f.key] = p
		if f.field.Tag.Get("required") == "true" {
			required = append(required, f.key)
		}
	}
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	if alt, ok := reflect.New(t).Interface().(ConfigAlternatives); ok {
		oneOf, anyOf := alt.ConfigAlternatives()
		for name, sets := range map[string][][]string{"oneOf": oneOf, "anyOf": anyOf} {
			if len(sets) == 0 {
				continue
			}
			var list []any
			for _, set := range sets {
				list = append(list, map[string]any{"required": set})
			}
			s[name] = list
		}
	}
	return s, nil
}

// itemKeywords constrain the items of an array and the values of a map.
var itemKeywords = []string{"pattern", "minLength", "maxLength"}

// literalKeywords are the tags whose value is a JSON literal.
var literalKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "minItems", "uniqueItems", "maxProperties"}

// fieldSchema is the schema of a field of type t with tag; def, when
// valid, is its default.
func fieldSchema(t reflect.Type, tag reflect.StructTag, def reflect.Value) (map[string]any, error) {
	s := map[string]any{}
	if d := tag.Get("doc"); d != "" {
		s["description"] = d
	}
	if tag.Get("deprecated") == "true" {
		s["deprecated"] = true
	}
	if def.IsValid() && def.Kind() == reflect.Pointer {
		if def.IsNil() {
			def = reflect.Value{}
		} else {
			def = def.Elem()
		}
	}
	switch {
	case t.Kind() == reflect.Struct || isStructPointer(t):
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		o, err := objectSchema(t, def)
		if err != nil {
			return nil, err
		}
		maps.Copy(s, o)
		return s, nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		items, err := objectSchema(t.Elem(), reflect.Value{})
		if err != nil {
			return nil, err
		}
		s["type"], s["items"] = "array", items
		return s, keywords(s, tag, nil)
	}
	_, typ, ok := leafType(t)
	if !ok {
		return nil, fmt.Errorf("type %s is not one DecodeConfig takes", t)
	}
	s["type"] = typ
	switch {
	case typ == "boolean":
		s["default"] = def.IsValid() && def.Bool()
	case def.IsValid() && !def.IsZero():
		s["default"] = def.Interface()
	}
	if typ == "array" || typ == "object" {
		items := map[string]any{"type": "string"}
		if err := keywords(items, tag, itemKeywords); err != nil {
			return nil, err
		}
		if typ == "array" {
			s["items"] = items
		} else {
			s["additionalProperties"] = items
		}
		return s, keywords(s, tag, nil)
	}
	return s, keywords(s, tag, nil)
}

// keywords sets s's keywords from tag: only those in only, or, with only
// nil, every keyword but the item keywords of an array or a map.
func keywords(s map[string]any, tag reflect.StructTag, only []string) error {
	container := s["type"] == "array" || s["type"] == "object"
	use := func(k string) bool {
		if only != nil {
			return slices.Contains(only, k)
		}
		return !container || !slices.Contains(itemKeywords, k)
	}
	if p, ok := tag.Lookup("pattern"); ok && use("pattern") {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("tag pattern:%q: %w", p, err)
		}
		s["pattern"] = p
	}
	if e, ok := tag.Lookup("enum"); ok && use("enum") {
		s["enum"] = strings.Split(e, ",")
	}
	for _, k := range literalKeywords {
		v, ok := tag.Lookup(k)
		if !ok || !use(k) {
			continue
		}
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("tag %s:%q is not a JSON literal", k, v)
		}
		s[k] = json.RawMessage(v)
	}
	return nil
}

// ConfigPattern compiles the pattern tag of key in config's struct (a
// struct or a pointer to one), so that a plugin checks a value with the
// pattern its schema shows, written once: key is dotted through nested
// objects ("image.id"), and names a list or a map whose items the pattern
// constrains by its own name ("subnets"). It panics when key has no
// pattern or the pattern does not compile, a programming error the
// plugin's first test run finds, as regexp.MustCompile does.
func ConfigPattern(config any, key string) *regexp.Regexp {
	t := reflect.TypeOf(config)
	path := strings.Split(key, ".")
	for i, name := range path {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) && t.Elem().Kind() == reflect.Struct {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			panic(fmt.Sprintf("pluginapi.ConfigPattern: %s is not an object", strings.Join(path[:i], ".")))
		}
		fields, err := configFields(t)
		if err != nil {
			panic(fmt.Sprintf("pluginapi.ConfigPattern: %v", err))
		}
		j := slices.IndexFunc(fields, func(f configField) bool { return f.key == name })
		if j < 0 {
			panic(fmt.Sprintf("pluginapi.ConfigPattern: %s has no key %q", t, name))
		}
		if i == len(path)-1 {
			p, ok := fields[j].field.Tag.Lookup("pattern")
			if !ok {
				panic(fmt.Sprintf("pluginapi.ConfigPattern: key %s has no pattern", key))
			}
			return regexp.MustCompile(p)
		}
		t = fields[j].field.Type
	}
	panic("pluginapi.ConfigPattern: no key")
}
