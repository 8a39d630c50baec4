// Package kubeconfig loads the client configuration a setting of kip.yaml
// names, the one way for every such setting (kubeconfig,
// bootstrap.kubeconfig, leaderElection.kubeconfig): a kubeconfig's path,
// or InCluster ("in-cluster") for the pod's ServiceAccount
// (rest.InClusterConfig); empty is client-go's defaults ($KUBECONFIG, else
// ~/.kube/config, else in-cluster), which only the top-level kubeconfig
// key leaves to it. Load's error names the key and its value ("loading
// leaderElection.kubeconfig /x: ..."), and Load says where the
// configuration came from, for the messages of later requests.
//
// It imports client-go and the standard library, and no Kip package, so
// that every host package may import it.
package kubeconfig
