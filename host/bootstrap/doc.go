// Package bootstrap gives kip the node's own identity as a kubelet gets
// it, by TLS bootstrap: from a bootstrap identity (a kubeconfig, or the
// pod's ServiceAccount, "in-cluster") it asks for the client certificate
// of system:node:<nodeName> in group system:nodes through a
// CertificateSigningRequest for the signer
// kubernetes.io/kube-apiserver-client-kubelet, with the usages
// kube-controller-manager's csrapproving controller accepts (digital
// signature and client auth, for the ECDSA key made here). That
// controller approves it by itself when the requester may create
// certificatesigningrequests/nodeclient (ClusterRole
// system:certificates.k8s.io:certificatesigningrequests:nodeclient); its
// csrsigning controller signs it. deploy/rbac/kip-bootstrap.yaml grants
// both, and selfnodeclient for renewals by the node itself.
//
// The key and the certificate stay in Config.CertDir (files 0600, the key
// never leaves it), in client-go's certificate file store: a restart
// reuses a certificate that is still valid for the same node. The first
// certificate is requested here, as the kubelet's bootstrap does, so that
// a request that is denied or never approved ends Start with an error that
// names the likely cause (the missing ClusterRoleBinding, the signer)
// within Config.ApprovalTimeout; renewals are client-go's
// util/certificate Manager's, at 70–90 % of the certificate's life, asked
// with the current certificate (the node itself, approved through
// selfnodeclient).
//
// The rest.Config a Manager gives presents the current certificate on
// every new connection and, when the certificate changes, closes the
// connections it opened, so that requests go on with the new one: the
// kubelet's pkg/kubelet/certificate/transport.go, ported (transport.go).
// Like the kubelet, it gives up when the renewals failed until the
// certificate expired: after 5 minutes without a valid certificate while
// the API server answers (it keeps waiting while the server does not),
// Expired receives an error wrapping ErrExpired, and kip exits with it
// (host/daemon) where the kubelet calls os.Exit, so that the process
// starts again and asks for a new certificate as its bootstrap identity.
//
// It imports client-go, the standard library, host/kubeconfig (which
// loads the bootstrap identity) and host/setting; only
// host/config (its Config) and host/daemon import it.
package bootstrap
