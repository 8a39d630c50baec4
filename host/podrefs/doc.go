// Package podrefs resolves what a pod references into the ApplyPod
// request of the cell protocol (cell/api): ConfigMaps, Secrets, service
// account tokens, the Downward API and image pull secrets (Resolve, from a
// Source: the API server's, or a Cache of it), as a kubelet reads them
// before it starts a pod.
//
// Resolve also adds what a kubelet knows of the cluster (Cluster,
// cluster.go): the service environment variables of every container
// (KUBERNETES_SERVICE_HOST and the other variables of the master Service
// always, those of the pod's namespace with enableServiceLinks), read
// from a ServiceLister (host/serviceenv's one informer), and the node's
// DNS settings (the configured cluster DNS, else the kube-dns Service's
// ClusterIP; the cluster domain), from which the agent writes the pod's
// /etc/resolv.conf, /etc/hosts and /etc/hostname.
//
// Tokens keeps a pod's service account tokens between resolutions, as the
// kubelet's token manager does: a token is reused until 80 % of its
// lifetime or 24 hours have passed, and Tokens.Refresh tells the caller
// when to resolve the pod again so that the new one reaches the cell in
// time.
//
// It imports cell/api and client-go; it never imports host/cells,
// host/node or host/serviceenv.
package podrefs
