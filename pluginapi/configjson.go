package pluginapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// DecodeConfigObject decodes raw, a JSON object of a plugin's
// configuration (ConfigureRequest.Config, or a nested object of it), key by
// key into fields, which maps each allowed key to a pointer to decode it
// into. Empty input (nil, zero-length or blank) and JSON null mean {}: no
// settings, every default. It refuses what a plugin should refuse, with an
// InvalidConfig error naming the key as the operator wrote it (prefix +
// key, such as "rateLimit.burst"): an unknown key (a typo must not be
// ignored), a value of the wrong JSON type, and raw not being an object,
// which names the object itself: the prefix without its dot
// ("rateLimit"), or ConfigKey for the whole configuration (prefix "").
// Keys are checked in sorted order, so the same key is named first every
// time. Values are only decoded: checking their range is the caller's.
func DecodeConfigObject(raw []byte, prefix string, fields map[string]any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		key := strings.TrimSuffix(prefix, ".")
		if key == "" {
			key = ConfigKey
		}
		return NewInvalidConfig(key, "must be a JSON object")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		target, ok := fields[k]
		if !ok {
			return NewInvalidConfig(prefix+k, "unknown key")
		}
		if err := json.Unmarshal(obj[k], target); err != nil {
			return NewInvalidConfig(prefix+k, "must be %s", jsonKind(target))
		}
	}
	return nil
}

// ConfigKey is the InvalidConfigError.Key of a plugin configuration that is
// wrong as a whole: the key under which kip.yaml holds it.
const ConfigKey = "plugin.config"

// jsonKind names the JSON type a decoding target wants, for messages.
func jsonKind(target any) string {
	switch target.(type) {
	case *[]json.RawMessage:
		return "an array"
	case *json.RawMessage, *map[string]any:
		return "a JSON object"
	}
	if t := reflect.TypeOf(target); t != nil && t.Kind() == reflect.Pointer {
		if kind, _, ok := leafType(t.Elem()); ok {
			return kind
		}
	}
	return fmt.Sprintf("a %T", target)
}
