package volumes

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IsZoneKey reports whether key is a node label that names a zone: the
// well-known topology.kubernetes.io/zone and its beta
// failure-domain.beta.kubernetes.io/zone, or a CSI driver's topology key
// "topology.<driver's domain>/zone" (topology.ebs.csi.aws.com/zone,
// topology.gke.io/zone, topology.disk.csi.azure.com/zone).
func IsZoneKey(key string) bool {
	if key == corev1.LabelTopologyZone || key == corev1.LabelFailureDomainBetaZone {
		return true
	}
	return strings.HasPrefix(key, "topology.") && strings.HasSuffix(key, "/zone")
}

// errNoZone is a node affinity no zone satisfies.
var errNoZone = errors.New("nodeAffinity leaves no zone")

// pvZones answers the zones pv is reachable from and where they come
// from. The required node selector terms are ORed, the expressions of a
// term ANDed (the scheduler's VolumeBinding reads them so); a term that
// names no zone allows any (nil). A term that pins a node
// (kubernetes.io/hostname, or the field metadata.name) is an error: no
// cell is that node. Without any zone in the affinity, the PV's zone
// labels count (in-tree PVs carry them; csi-translation-lib's
// translateTopologyFromInTreeToCSI reads them the same way).
func pvZones(pv *corev1.PersistentVolume) ([]string, string, error) {
	var terms []corev1.NodeSelectorTerm
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		terms = na.Required.NodeSelectorTerms
	}
	var (
		zones   []string
		keys    []string
		anyZone bool // a term names no zone
		named   bool // a term names one
	)
	for _, t := range terms {
		tz, tkeys, err := termZones(t)
		if err != nil {
			return nil, "", err
		}
		if tkeys == nil {
			anyZone = true
			continue
		}
		named = true
		for _, k := range tkeys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		for _, z := range tz {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	if named && !anyZone {
		if len(zones) == 0 {
			return nil, "", errNoZone
		}
		return zones, fmt.Sprintf("PersistentVolume %q nodeAffinity %s", pv.Name, strings.Join(keys, ",")), nil
	}
	if named {
		// Another term allows any zone.
		return nil, "", nil
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone} {
		if l := pv.Labels[key]; l != "" {
			return strings.Split(l, multiZoneDelimiter), fmt.Sprintf("PersistentVolume %q label %s", pv.Name, key), nil
		}
	}
	return nil, "", nil
}

// termZones answers the zones one node selector term allows (the
// intersection of its zone expressions) and the zone keys it reads; nil
// keys: the term names no zone.
func termZones(t corev1.NodeSelectorTerm) ([]string, []string, error) {
	for _, f := range t.MatchFields {
		if f.Key == "metadata.name" {
			return nil, nil, fmt.Errorf("nodeAffinity requires node %s (matchFields metadata.name): a cell is no such node", strings.Join(f.Values, ","))
		}
	}
	var (
		zones []string
		keys  []string
	)
	for _, e := range t.MatchExpressions {
		if e.Key == corev1.LabelHostname {
			return nil, nil, fmt.Errorf("nodeAffinity requires %s %s %v: the volume is local to a node, and a cell is no such node", e.Key, e.Operator, e.Values)
		}
		if !IsZoneKey(e.Key) {
			// Other keys (region, a driver's own) are the node's
			// business: the scheduler already matched them against the
			// Kip node's labels.
			continue
		}
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
		case corev1.NodeSelectorOpExists:
			continue
		default:
			return nil, nil, fmt.Errorf("nodeAffinity %s %s is not supported: a zone is required with In", e.Key, e.Operator)
		}
		if keys == nil {
			zones = slices.Clone(e.Values)
		} else {
			zones = slices.DeleteFunc(zones, func(z string) bool { return !slices.Contains(e.Values, z) })
		}
		keys = append(keys, e.Key)
	}
	return zones, keys, nil
}
