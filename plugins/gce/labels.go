package gce

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// The plugin's labels on every cell's instance and boot disk: the standard
// tags (pluginapi.StandardTags) under label keys, with values encoded by
// labelValue.
const (
	labelCluster = "kip-cluster"
	labelNode    = "kip-node"
	labelCell    = "kip-cell"
	labelPodUID  = "kip-pod-uid"
)

// standardLabelKeys are set by the plugin; no configuration may set them.
var standardLabelKeys = []string{labelCluster, labelNode, labelCell, labelPodUID}

// labelOfTag maps the standard tags to their labels.
var labelOfTag = map[string]string{
	pluginapi.TagCluster: labelCluster,
	pluginapi.TagNode:    labelNode,
	pluginapi.TagCell:    labelCell,
	pluginapi.TagPodUID:  labelPodUID,
}

// Metadata keys of a cell's instance (plugins/gce/doc.go).
const (
	metadataBootstrap = "kip-bootstrap"
	metadataStartup   = "startup-script"
	metadataTags      = "kip-tags"
)

// labelHash is how many hex digits of SHA-256 an encoded label value ends
// with.
const labelHash = 8

// labelValue encodes v as a label value: lowercased, every character but
// a-z, 0-9, _ and - replaced by -, and, when that changed anything or v is
// longer than 63 characters, cut to 54 characters and suffixed with - and
// the first 8 hex digits of v's SHA-256, so that values that differ stay
// apart. A value that is already a label value is itself.
func labelValue(v string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(v) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if out == v && len(out) <= maxLabelLen {
		return out
	}
	sum := sha256.Sum256([]byte(v))
	return out[:min(len(out), maxLabelLen-labelHash-1)] + "-" + hex.EncodeToString(sum[:])[:labelHash]
}

// labelsFor returns a cell's labels: the configured ones and the standard
// tags' (which win).
func (cfg *config) labelsFor(tags map[string]string) map[string]string {
	out := maps.Clone(cfg.labels)
	if out == nil {
		out = map[string]string{}
	}
	for tag, label := range labelOfTag {
		out[label] = labelValue(tags[tag])
	}
	return out
}

// encodeTags is the kip-tags metadata value: the cell's tags, exactly
// (labels cannot hold them: keys like kipcell.io/cluster, any values).
func encodeTags(tags map[string]string) string {
	data, _ := json.Marshal(tags) // a map of strings always marshals
	return string(data)
}

// decodeTags reads the kip-tags metadata value, or, without one, the
// standard tags back from the labels (encoded values as they are).
func decodeTags(meta string, labels map[string]string) map[string]string {
	var tags map[string]string
	if meta != "" && json.Unmarshal([]byte(meta), &tags) == nil && tags != nil {
		return tags
	}
	tags = map[string]string{}
	for tag, label := range labelOfTag {
		if v, ok := labels[label]; ok {
			tags[tag] = v
		}
	}
	return tags
}
