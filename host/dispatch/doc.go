// Package dispatch is the host's side of the cell protocol (cell/api): it
// joins a cell's agent (Join: the agent's request, pinned to the key it
// serves, signed by a JoinSigner), dials it over mutual TLS, renews its
// certificate over that connection (Agent.Renew: the agent's new key,
// signed by a RenewSigner on the evidence of the certificate it served;
// Rejoin for one whose certificate expired, which Join reports as
// Joined.Expired), resolves what the pod references
// (ConfigMaps, Secrets, service account tokens, the Downward API, image
// pull secrets) into the ApplyPod request, pushes the desired pod,
// consumes the status stream, and bridges logs, exec, attach and
// port-forward between the kubelet API and the agent.
//
// The connection to an agent pings it when idle (Keepalive.Time: kip's
// cells.agentKeepalive, by default cell/api's KeepaliveTime, within the
// agent's enforcement policy) and is dropped when no answer comes within
// Keepalive.Timeout (cells.agentKeepaliveTimeout), so a cell gone silent
// (packets dropped, no reset) ends its status stream with Unavailable
// within 45 s by default and the host subscribes again; a call that fails Unavailable before the
// agent answered (a connection found dead when the call was made, as by
// kubectl exec) is tried once more on a new connection (retryOnce).
//
// Resolve also adds what a kubelet knows of the cluster (Cluster,
// cluster.go): the service environment variables of every container
// (KUBERNETES_SERVICE_HOST and the other variables of the master Service
// always, those of the pod's namespace with enableServiceLinks), read
// from a ServiceLister (host/serviceenv' one informer), and the node's DNS
// settings (the configured cluster DNS, else the kube-dns Service's
// ClusterIP; the cluster domain), from which the agent writes the pod's
// /etc/resolv.conf, /etc/hosts and /etc/hostname.
//
// Tokens keeps a pod's service account tokens between resolutions, as the
// kubelet's token manager does: a token is reused until 80 % of its
// lifetime or 24 hours have passed, and Tokens.Refresh tells the caller
// when to resolve the pod again so that the new one reaches the cell in
// time.
//
// It imports cell/api, client-go types and virtual-kubelet's api types; it
// never imports host/cells, host/node or host/serviceenv.
package dispatch
