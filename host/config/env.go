package config

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/knadh/koanf/parsers/yaml"
)

// EnvPrefix is the prefix of environment variables that set config keys:
// KIP_CLUSTER_ID sets clusterID, KIP_PLUGIN_NAME sets plugin.name.
const EnvPrefix = "KIP_"

// EnvName is the variable that sets key: KIP_ and the key's words in upper
// case, joined by underscores (cells.catalogTTL: KIP_CELLS_CATALOG_TTL,
// match.agentReserveCPU: KIP_MATCH_AGENT_RESERVE_CPU).
func EnvName(key string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	runes := []rune(key)
	for i, r := range runes {
		switch {
		case r == '.':
			b.WriteByte('_')
			continue
		case i > 0 && unicode.IsUpper(r) && runes[i-1] != '.':
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			// A word starts at an upper-case letter after a lower-case
			// letter or digit (catalogTTL), or at the last capital of an
			// acronym that a lower-case word follows (VCPUHour).
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// env reads the KIP_* variables of environ that set keys:
//
//   - a variable whose name after KIP_, compared without case and
//     underscores, is a key's without case and dots sets that key
//     (KIP_NODE_INTERNAL_IP, KIP_NODE_INTERNALIP: node.internalIP); a list
//     key takes comma-separated values, a list of mappings a YAML flow
//     sequence ([{name: small, count: 2}]);
//   - one that names a key that moved is refused, naming the new key's
//     variable;
//   - KIP_PLUGIN_CONFIG_<NAME> sets a key of plugin.config (pluginKey).
//
// Other KIP_ variables are left alone: KIP_ is also the prefix of
// variables kip passes to plugins and cells. fileKeys are the keys the
// file set.
func (ks *keySet) env(environ []string, fileKeys []string) (map[string]any, error) {
	sorted := append([]string(nil), environ...)
	sort.Strings(sorted)
	out := make(map[string]any)
	for _, kv := range sorted {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if key, ok := ks.byNorm[normalize(strings.TrimPrefix(name, EnvPrefix))]; ok {
			if to, moved := Moved[key]; moved {
				return nil, &Error{Key: key, Source: name, Reason: fmt.Sprintf("moved to %s: set %s instead", to, EnvName(to))}
			}
			switch {
			case ks.freeForm[key]:
				return nil, &Error{Key: key, Source: name, Reason: fmt.Sprintf("set its keys one by one, with %s_<KEY>", EnvName(key))}
			case ks.list[key]:
				out[key] = splitList(value)
			case ks.records[key]:
				v, err := yamlValue(value)
				if _, isList := v.([]any); err != nil || !isList && value != "" {
					return nil, &Error{Key: key, Source: name, Reason: fmt.Sprintf("%q is not a YAML list of mappings ([{name: small, count: 2}])", value)}
				}
				out[key] = v
			default:
				out[key] = value
			}
			continue
		}
		for ff := range ks.freeForm {
			rest, ok := strings.CutPrefix(name, EnvName(ff)+"_")
			if !ok {
				continue
			}
			key, err := pluginKey(ff, rest, fileKeys)
			if err != nil {
				return nil, &Error{Key: ff, Source: name, Reason: err.Error()}
			}
			v, err := yamlValue(value)
			if err != nil {
				return nil, &Error{Key: key, Source: name, Reason: err.Error()}
			}
			out[key] = v
		}
	}
	return out, nil
}

// splitList reads a list key's value: comma-separated, spaces around an
// item dropped; empty is the empty list.
func splitList(value string) []string {
	out := []string{}
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// pluginKey is the key under ff (plugin.config) that rest, the variable's
// name after KIP_PLUGIN_CONFIG_, sets:
//
//   - the key under ff that the file sets, at any depth, when rest spells
//     it without case, dots and underscores (KIP_PLUGIN_CONFIG_VPC_ID:
//     vpcID, KIP_PLUGIN_CONFIG_RATE_LIMIT_BURST: rateLimit.burst);
//   - otherwise, a double underscore separates levels, and each level
//     is written as it stands if it has a lower-case letter
//     (KIP_PLUGIN_CONFIG_vpcID: vpcID) or else becomes camelCase from its
//     words (KIP_PLUGIN_CONFIG_STATE_DIR: stateDir,
//     KIP_PLUGIN_CONFIG_RATE_LIMIT__BURST: rateLimit.burst).
func pluginKey(ff, rest string, fileKeys []string) (string, error) {
	var matches []string
	for _, key := range fileKeys {
		if sub, ok := strings.CutPrefix(key, ff+"."); ok && normalize(sub) == normalize(rest) {
			matches = append(matches, key)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
	default:
		sort.Strings(matches)
		return "", fmt.Errorf("names %s, which the file sets: rename one", strings.Join(matches, " and "))
	}
	levels := strings.Split(rest, "__")
	for i, level := range levels {
		if strings.Trim(level, "_") == "" {
			return "", fmt.Errorf("the variable names no key (KIP_PLUGIN_CONFIG_<KEY>, levels separated by __)")
		}
		if strings.IndexFunc(level, unicode.IsLower) < 0 {
			level = camelCase(level)
		}
		levels[i] = level
	}
	return ff + "." + strings.Join(levels, "."), nil
}

// camelCase joins the words of an upper-case, underscore-separated name:
// STATE_DIR is stateDir.
func camelCase(name string) string {
	var b strings.Builder
	for _, word := range strings.Split(name, "_") {
		if word == "" {
			continue
		}
		word = strings.ToLower(word)
		if b.Len() > 0 {
			word = strings.ToUpper(word[:1]) + word[1:]
		}
		b.WriteString(word)
	}
	return b.String()
}

// yamlValue reads a plugin.config value as kip.yaml would after "key: ":
// 5 is a number, true a boolean, [a, b] a list, {a: 1} a mapping, "5" a
// string; empty is the empty string.
func yamlValue(value string) (any, error) {
	if value == "" {
		return "", nil
	}
	m, err := yaml.Parser().Unmarshal([]byte("v: " + value))
	if err != nil || len(m) != 1 {
		return nil, fmt.Errorf("%q is not a YAML value (quote it to make it a string)", value)
	}
	return m["v"], nil
}
