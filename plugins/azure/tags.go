package azure

import (
	"maps"
	"slices"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// The plugin's own tag names on every cell's VM: Azure tag names may not
// hold < > % & \ ? /, so the standard tags (kipcell.io/cluster, …) are
// written under these names, and read back under the standard keys.
const (
	tagCluster = "kip-cluster"
	tagNode    = "kip-node"
	tagCell    = "kip-cell"
	tagPodUID  = "kip-pod-uid"
)

// tagOfStandard maps a standard tag key to its Azure tag name.
var tagOfStandard = map[string]string{
	pluginapi.TagCluster: tagCluster,
	pluginapi.TagNode:    tagNode,
	pluginapi.TagCell:    tagCell,
	pluginapi.TagPodUID:  tagPodUID,
}

// forbiddenTagChars are the characters Azure refuses in a tag name.
const forbiddenTagChars = `<>%&\?/`

// isReservedTag reports whether name is one of the plugin's own tags
// (Azure compares tag names without case).
func isReservedTag(name string) bool {
	for _, t := range tagOfStandard {
		if strings.EqualFold(t, name) {
			return true
		}
	}
	return false
}

// tagEscapes write the characters Azure refuses in a tag name, and ~
// itself, as ~ and a digit, so that any tag key is a tag name and reads
// back as it was: kipcell.io/plugintest is kipcell.io~1plugintest.
var (
	tagEscaper   = strings.NewReplacer("~", "~0", "/", "~1", "<", "~2", ">", "~3", "%", "~4", "&", "~5", `\`, "~6", "?", "~7")
	tagUnescaper = strings.NewReplacer("~0", "~", "~1", "/", "~2", "<", "~3", ">", "~4", "%", "~5", "&", "~6", `\`, "~7", "?")
)

// azureTagName is the Azure tag name of a tag key: the plugin's name of a
// standard key, else the key escaped (tagEscaper).
func azureTagName(key string) string {
	if t, ok := tagOfStandard[key]; ok {
		return t
	}
	return tagEscaper.Replace(key)
}

// vmTags are the tags of a cell's VM: the configured tags, the request's
// extra tags (names escaped, values cut to 256 characters)
// and the standard tags under the plugin's names, which win. Tags beyond
// Azure's 50, or with a name longer than 512 once escaped, are left out,
// the request's (the last by name first), never the plugin's or the
// configuration's.
func (cfg *config) vmTags(tags map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range cfg.tags {
		out[azureTagName(k)] = ptr(v)
	}
	standard := map[string]*string{}
	var extra []string
	for k, v := range tags {
		if t, ok := tagOfStandard[k]; ok {
			standard[t] = ptr(v)
			continue
		}
		extra = append(extra, k)
	}
	slices.Sort(extra)
	for _, k := range extra {
		if len(out)+len(standard) >= maxTags {
			break
		}
		v := tags[k]
		if len(v) > maxTagValue {
			v = v[:maxTagValue]
		}
		if n := azureTagName(k); len(n) <= maxTagName && out[n] == nil && !isReservedTag(n) {
			out[n] = ptr(v)
		}
	}
	maps.Copy(out, standard)
	return out
}

// tagsFromAzure are a VM's tags as the contract's Tags: the plugin's names
// under the standard keys, every other tag's name unescaped.
func tagsFromAzure(tags map[string]*string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		if v == nil {
			continue
		}
		out[tagUnescaper.Replace(k)] = *v
	}
	for std, t := range tagOfStandard {
		for k, v := range out {
			if strings.EqualFold(k, t) {
				delete(out, k)
				out[std] = v
				break
			}
		}
	}
	return out
}

// parseResourceID returns the name of an ARM resource ID of the given
// provider type (Microsoft.Network/networkSecurityGroups); ok is false for
// an ID of another shape. Azure compares resource IDs without case.
func parseResourceID(id, providerType string) (name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	pt := strings.Split(providerType, "/")
	if len(parts) != 6+len(pt) || !strings.HasPrefix(id, "/") ||
		!strings.EqualFold(parts[0], "subscriptions") || parts[1] == "" ||
		!strings.EqualFold(parts[2], "resourceGroups") || parts[3] == "" ||
		!strings.EqualFold(parts[4], "providers") || !strings.EqualFold(parts[5], pt[0]) ||
		!strings.EqualFold(parts[6], pt[1]) || parts[7] == "" {
		return "", false
	}
	return parts[7], true
}

// subnetRef is a subnet's resource ID taken apart.
type subnetRef struct {
	subscription, resourceGroup, vnet, subnet string
}

// parseSubnetID takes a subnet's resource ID apart:
// /subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>.
func parseSubnetID(id string) (subnetRef, bool) {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if !strings.HasPrefix(id, "/") || len(parts) != 10 ||
		!strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourceGroups") ||
		!strings.EqualFold(parts[4], "providers") || !strings.EqualFold(parts[5], "Microsoft.Network") ||
		!strings.EqualFold(parts[6], "virtualNetworks") || !strings.EqualFold(parts[8], "subnets") ||
		slices.Contains([]string{parts[1], parts[3], parts[7], parts[9]}, "") {
		return subnetRef{}, false
	}
	return subnetRef{parts[1], parts[3], parts[7], parts[9]}, true
}

func isSubnetID(id string) bool { _, ok := parseSubnetID(id); return ok }

// lastSegment is the last segment of a resource ID (its name).
func lastSegment(id string) string {
	return id[strings.LastIndex(id, "/")+1:]
}

func ptr[T any](v T) *T { return &v }

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
