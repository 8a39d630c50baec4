// Package choices bounds what a pod author may choose about the instance
// of the pod's cell, by namespace and ServiceAccount: the operator's
// cells.choices section of kip.yaml.
//
// A pod chooses its instance beyond what its requests need with
// annotations and node-selector labels: an instance type
// (kipcell.io/instance-type, node.kubernetes.io/instance-type), a capacity
// type (kipcell.io/capacity-type), a GPU model (kipcell.io/gpu-kind), an
// instance profile and security groups (kipcell.io/instance-profile,
// kipcell.io/security-groups: the cloud identity and firewall of the
// instance) and a root volume's size (kipcell.io/volume-size). The
// requests themselves, which ResourceQuota bounds, are not a choice: the
// matcher gives them the cheapest instance type that fits.
//
// Without rules (the default) a pod may choose anything the plugin offers
// (the plugin's own allow-lists, such as aws's allowedInstanceProfiles,
// still apply). With rules, the first rule whose namespaces and
// serviceAccounts match the pod decides, and a pod no rule matches may
// choose nothing. A rule lists what its pods may choose (glob patterns of
// instance types, capacity types, GPU kinds, instance profiles, security
// groups; "*" is anything, an empty list nothing), a largest root volume,
// and maxPriceRatio: a pod that names an instance type gets one whose
// hourly price is at most that many times the price of the cheapest type
// that fits its requests, or, where the catalog does not know both prices,
// whose vCPUs and memory are at most that many times the cheapest type's.
//
// Check refuses a pod's choices before any instance is launched with a
// *ForbiddenError that names the rule and the annotation or label; the
// host keeps such a pod Pending with reason ChoiceForbidden and a Warning
// event that says it, and looks again when the pod changes. Bound leaves
// out the candidates above the ceiling, with a *ForbiddenError when none
// is left.
//
// What ResourceQuota sees and what a pod costs: a quota counts the pod's
// requests and limits, never its instance. A cell is the cheapest
// instance type that fits the requests unless the pod chooses another,
// so maxPriceRatio is what keeps the cost of a namespace within a known
// multiple of what its quota allows.
package choices
