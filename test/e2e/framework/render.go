package framework

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kipcell/kip/host/node"
)

// Placement says where an add-on's pods run (the cluster DNS,
// metrics-server): by default where the manifest's own scheduling puts
// them, which is a kubelet node (the manifests tolerate no Kip taint).
type Placement struct {
	// Node, when set, is the only node the pods may run on: their
	// nodeSelector gains kubernetes.io/hostname=Node and they tolerate a
	// Kip node's taint, so that Node may be kip's (a test of CoreDNS in
	// a cell) or the kubelet node (make demo, whose Kip node may carry
	// no taint at all).
	Node string
	// Namespace, when set, keeps only the manifest's namespaced objects
	// of the kinds in Kinds, moved to Namespace: a second copy of an
	// add-on beside the cluster's, that takes none of its cluster-wide
	// names (ClusterRoles, the kube-dns Service).
	Namespace string
	Kinds     []string
}

// place rewrites the documents of manifest (separated by "\n---\n") as p
// says; with a zero p it returns manifest unchanged. Rewritten documents
// are JSON, which kubectl reads as YAML.
func place(manifest []byte, p Placement) ([]byte, error) {
	if p.Node == "" && p.Namespace == "" {
		return manifest, nil
	}
	var out []string
	for i, doc := range strings.Split(string(manifest), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i+1, err)
		}
		if len(obj) == 0 {
			continue // comments only
		}
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		if p.Namespace != "" {
			if !slices.Contains(p.Kinds, kind) || meta == nil || meta["namespace"] == nil {
				continue
			}
			meta["namespace"] = p.Namespace
		}
		if p.Node != "" && kind == "Deployment" {
			if err := pinPods(obj, p.Node); err != nil {
				return nil, fmt.Errorf("placing document %d (Deployment): %w", i+1, err)
			}
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding document %d: %w", i+1, err)
		}
		out = append(out, string(data))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no object of the kinds %v with a namespace", p.Kinds)
	}
	return []byte(strings.Join(out, "\n---\n")), nil
}

// pinPods gives a Deployment's pod template the nodeSelector
// kubernetes.io/hostname=nodeName and a toleration of the Kip node's
// taint.
func pinPods(deployment map[string]any, nodeName string) error {
	spec, ok := dig(deployment, "spec", "template", "spec")
	if !ok {
		return fmt.Errorf("no spec.template.spec")
	}
	selector, _ := spec["nodeSelector"].(map[string]any)
	if selector == nil {
		selector = map[string]any{}
	}
	selector[node.LabelHostname] = nodeName
	spec["nodeSelector"] = selector
	taint, err := node.ParseTaint(node.DefaultTaint)
	if err != nil {
		return fmt.Errorf("parsing the Kip node's taint: %w", err)
	}
	tolerations, _ := spec["tolerations"].([]any)
	spec["tolerations"] = append(tolerations, map[string]any{"key": taint.Key, "operator": "Exists", "effect": string(taint.Effect)})
	return nil
}

// dig returns the map at path in obj.
func dig(obj map[string]any, path ...string) (map[string]any, bool) {
	for _, key := range path {
		next, ok := obj[key].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, true
}
