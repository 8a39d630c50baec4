// Package serviceenv is the host's one watch of the cluster's Services: a
// shared informer over every namespace, started once by the daemon and
// read by whatever needs Services, never a watch per pod.
//
// A kubelet keeps the same cache (its serviceLister) to build the service
// environment variables of every container (host/podrefs does that for
// kip) and to know the cluster DNS Service; kube-proxy keeps one to
// program Service addresses. kip's cells need both, and both read this
// one cache.
//
// # Using it
//
//	factory := informers.NewSharedInformerFactory(client, 0)  // no resync
//	svcs := services.New(factory, log)   // the factory's Services informer
//	go svcs.Run(ctx)                     // blocks until ctx ends
//	err := svcs.WaitForSync(ctx)         // the first list is in
//	list, err := svcs.List("default")    // a namespace's Services, by name
//	svc, err := svcs.Get("kube-system", "kube-dns")  // NotFound as the API says it
//	stop := svcs.OnChange(func(c services.Change) { ... })
//	defer stop()
//
// List and Get read the cache and never call the API server. OnChange
// handlers are called one at a time, in the order of the changes, on the
// informer's own goroutine: they must return quickly (hand the change to
// a channel or a work queue). A handler added before Run is told of every
// Service of the first list as a change; one added later is not told of
// the Services that already exist, and lists them itself.
//
// A node identity (system:node:<name>) may list and watch Services: the
// Node authorizer's node rules grant it, as they do to every kubelet.
//
// It imports client-go and the Kubernetes API types; no Kip package. Every
// host package above floor 0 may be handed an *Informer, but only
// host/daemon builds one.
package serviceenv
