package node

import (
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeObject is the Node kip registers: labels, annotations, taint,
// capacity, addresses, the kubelet endpoint and Ready conditions. port is the kubelet API's
// real port; st is what changes while kip runs: the extended resources the
// backend offers (ResourceReporter), why the node is not ready, its
// disks and the volume drivers whose zone keys it carries.
func nodeObject(cfg Config, internalIP string, port int32, st nodeState, now time.Time) *corev1.Node {
	extended := st.extended
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelType] = LabelTypeKip
	labels[LabelHostname] = cfg.Name
	labels[LabelOS] = "linux"
	labels[LabelArch] = cfg.Arch
	maps.Copy(labels, cfg.zoneLabels(st.drivers))
	if cfg.SetRoleLabel {
		labels[LabelRole] = LabelRoleKip
	}

	var taints []corev1.Taint
	if t := cfg.taint(); t != nil {
		taints = []corev1.Taint{*t}
	}

	version := "kip"
	if cfg.Version != "" {
		version = "kip/" + strings.TrimPrefix(cfg.Version, "kip/")
	}
	t := metav1.NewTime(now)
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: labels, Annotations: maps.Clone(cfg.Annotations)},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:        cfg.resources(extended),
			Allocatable:     cfg.resources(extended),
			VolumesAttached: st.attached,
			VolumesInUse:    st.inUse,
			Phase:           corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				ready(st.notReady, cond),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "every pod gets its own cell"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "every pod gets its own cell"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "every pod gets its own cell"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "cells bring their own network"),
			},
			// InternalIP only: the API server's default
			// --kubelet-preferred-address-types puts Hostname first, and
			// the node's name resolves nowhere.
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux",
				Architecture:    cfg.Arch,
				KubeletVersion:  version,
				OSImage:         "kip cells",
			},
		},
	}
}

// missingTaint tells whether an existing Node lacks the configured taint.
// A node identity cannot change its own taints after registration
// (NodeRestriction), so kip only reports it.
func missingTaint(n *corev1.Node, want *corev1.Taint) bool {
	if want == nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(want) && t.Value == want.Value {
			return false
		}
	}
	return true
}

// ready is the Ready condition: True, or False with the kubelet's reason
// KubeletNotReady and why.
func ready(notReady string, cond func(corev1.NodeConditionType, corev1.ConditionStatus, string, string) corev1.NodeCondition) corev1.NodeCondition {
	if notReady != "" {
		return cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", notReady)
	}
	return cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kip is ready to run pods on cells")
}
