// Package dispatch is the host's side of the cell protocol (cell/api): it
// dials a cell's agent over mutual TLS, resolves what the pod references
// (ConfigMaps, Secrets, service account tokens, the Downward API, image
// pull secrets) into the ApplyPod request, pushes the desired pod,
// consumes the status stream, and bridges logs, exec, attach and
// port-forward between the kubelet API and the agent.
//
// Tokens keeps a pod's service account tokens between resolutions, as the
// kubelet's token manager does: a token is reused until 80 % of its
// lifetime or 24 hours have passed, and Tokens.Refresh tells the caller
// when to resolve the pod again so that the new one reaches the cell in
// time.
//
// It imports cell/api, client-go types and virtual-kubelet's api types; it
// never imports host/cells or host/node.
package dispatch
