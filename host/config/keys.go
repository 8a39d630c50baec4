package config

import (
	"encoding"
	"reflect"
	"slices"
	"strings"
)

// Setting is one key of kip.yaml and its value in a Config.
type Setting struct {
	// Key is the key as kip.yaml spells it: "cells.catalogTTL".
	Key   string
	Value any
}

// Settings lists every key of c and its value, in the order of the fields
// that hold them. A key is a field with a koanf tag (not "-"); a struct
// field is a section whose keys are its own fields', unless its type reads
// itself from text; a map (plugin.config) is one free-form key.
func (c *Config) Settings() []Setting {
	var out []Setting
	walkSettings(reflect.ValueOf(c).Elem(), "", nil, func(key string, v reflect.Value, _ []reflect.StructField) {
		out = append(out, Setting{Key: key, Value: v.Interface()})
	})
	return out
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// walkSettings calls leaf for every key under v, a struct, in field order,
// with the fields that lead to it from v (path's, then the key's own; the
// configuration reference reads their doc comments).
func walkSettings(v reflect.Value, prefix string, path []reflect.StructField, leaf func(key string, v reflect.Value, fields []reflect.StructField)) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		fields := append(slices.Clip(path), f)
		if f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(textUnmarshaler) {
			walkSettings(v.Field(i), prefix+tag+".", fields, leaf)
			continue
		}
		leaf(prefix+tag, v.Field(i), fields)
	}
}

// keySet is what Load knows of the keys: derived from Config's fields, so
// a component's new setting needs no line here.
type keySet struct {
	// defaults holds the default of every key that has one, by key.
	defaults map[string]any
	// leaves are the keys; freeForm those that are a mapping of any keys
	// (plugin.config); text those read from text (match.agentReserveCPU);
	// list those that are lists; records those lists of mappings
	// (cells.warmPool.pools).
	leaves, freeForm, text, list, records map[string]bool
	// fields are the keys an entry of each record may have ("size.cpu").
	fields map[string]map[string]bool
	// byNorm finds a key and a moved key by normalize's spelling.
	byNorm map[string]string
}

// keysOf lists the keys of defaults, a Config holding the defaults.
func keysOf(defaults *Config) *keySet {
	ks := &keySet{
		defaults: map[string]any{}, leaves: map[string]bool{}, freeForm: map[string]bool{},
		text: map[string]bool{}, list: map[string]bool{}, records: map[string]bool{}, byNorm: map[string]string{},
		fields: map[string]map[string]bool{},
	}
	walkSettings(reflect.ValueOf(defaults).Elem(), "", nil, func(key string, v reflect.Value, _ []reflect.StructField) {
		ks.leaves[key] = true
		ks.byNorm[normalize(key)] = key
		switch {
		case reflect.PointerTo(v.Type()).Implements(textUnmarshaler):
			ks.text[key] = true
		case v.Kind() == reflect.Map:
			ks.freeForm[key] = true
		case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
			ks.records[key] = true
			ks.fields[key] = map[string]bool{}
			walkSettings(reflect.New(v.Type().Elem()).Elem(), "", nil, func(field string, _ reflect.Value, _ []reflect.StructField) {
				ks.fields[key][field] = true
			})
		case v.Kind() == reflect.Slice:
			ks.list[key] = true
		}
		switch {
		case (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.IsNil():
			// No default: the key stays unset.
		case ks.text[key]:
			text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
			if err == nil {
				ks.defaults[key] = string(text)
			}
		default:
			ks.defaults[key] = v.Interface()
		}
	})
	for from := range Moved {
		ks.byNorm[normalize(from)] = from
	}
	return ks
}

// settable tells whether a layer may set key: a key, a free-form key or a
// key inside one.
func (ks *keySet) settable(key string) bool {
	if ks.leaves[key] {
		return true
	}
	for ff := range ks.freeForm {
		if strings.HasPrefix(key, ff+".") {
			return true
		}
	}
	return false
}

// normalize is how a KIP_* variable and a mistyped key are compared with
// the keys: lower case, without dots, dashes and underscores.
func normalize(key string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(key))
}
