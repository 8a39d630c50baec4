// Package e2e holds Kip's end-to-end tests. They run against a real control
// plane (built from source and cached, started once per run by TestMain)
// and only with the e2e build tag: make e2e, or
//
//	go test -tags e2e -race ./test/e2e/...
//
// Environment:
//
//	KIP_E2E_PLUGIN=local|aws|gce|azure  the plugin kip runs with (default
//	                           local; aws runs against the EC2 simulator,
//	                           gce against the Compute Engine simulator,
//	                           azure against the ARM simulator)
//	KIP_E2E_KEEP_LOGS=DIR      copy kip's and the simulator's full logs
//	                           into DIR when the run ends, named after
//	                           each kip's node (DIR/kip.kip.log,
//	                           DIR/kip.gcesim.log)
//	KIP_E2E_CLUSTER_DNS=1|0    deploy CoreDNS as the cluster DNS
//	                           (kube-system/kube-dns, on the kubelet
//	                           node kip-infra) before the tests;
//	                           (on by default; framework.ClusterDNS)
package e2e
