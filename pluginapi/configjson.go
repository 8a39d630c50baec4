package pluginapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// DecodeConfigObject decodes raw, a JSON object of a plugin's
// configuration (ConfigureRequest.Config, or a nested object of it), key by
// key into fields, which maps each allowed key to a pointer to decode it
// into. It refuses what a plugin should refuse, with an InvalidConfig error
// naming the key as the operator wrote it (prefix + key, such as
// "rateLimit.burst"): raw not being an object, an unknown key (a typo must
// not be ignored), a value of the wrong JSON type. Keys are checked in
// sorted order, so the same key is named first every time. Values are
// only decoded: checking their range is the caller's.
func DecodeConfigObject(raw []byte, prefix string, fields map[string]any) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return NewInvalidConfig(strings.TrimSuffix(prefix, "."), "must be a JSON object")
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

// jsonKind names the JSON type a decoding target wants, for messages.
func jsonKind(target any) string {
	switch target.(type) {
	case *string:
		return "a string"
	case *[]string:
		return "an array of strings"
	case *int, *int32, *int64:
		return "an integer"
	case *float64, **float64:
		return "a number"
	case *bool:
		return "true or false"
	case *map[string]string:
		return "an object of strings"
	case *[]json.RawMessage:
		return "an array"
	case *json.RawMessage, *map[string]any:
		return "a JSON object"
	default:
		return fmt.Sprintf("a %T", target)
	}
}
