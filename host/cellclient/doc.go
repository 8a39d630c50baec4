// Package cellclient is the host's client of a cell's agent, its side of
// the cell protocol (cell/api): it joins the agent (Join: the agent's
// request, pinned to the key it serves, signed by a JoinSigner), dials it
// over mutual TLS, renews its certificate over that connection
// (Agent.Renew: the agent's new key, signed by a RenewSigner on the
// evidence of the certificate it served; Rejoin for one whose certificate
// expired, which Join reports as Joined.Expired), pushes the desired pod
// (the ApplyPod request host/podrefs resolves), consumes the status
// stream, and bridges logs, exec, attach and port-forward between the
// kubelet API and the agent.
//
// The connection to an agent pings it when idle (Keepalive.Time: kip's
// cells.agentKeepalive, by default cell/api's KeepaliveTime, within the
// agent's enforcement policy) and is dropped when no answer comes within
// Keepalive.Timeout (cells.agentKeepaliveTimeout), so a cell gone silent
// (packets dropped, no reset) ends its status stream with Unavailable
// within 45 s by default and the host subscribes again; a call that fails
// Unavailable before the agent answered (a connection found dead when the
// call was made, as by kubectl exec) is tried once more on a new
// connection (retryOnce).
//
// It imports cell/api, client-go types and virtual-kubelet's api types; it
// never imports host/cells or host/node.
package cellclient
