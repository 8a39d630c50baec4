// Package sdktest tests the GCE simulator (test/cloudsim/gce, package
// gcesim) with the real cloud.google.com/go/compute v1.74.0 REST clients,
// so that the simulator answers what the SDK sends and the SDK reads what
// the simulator answers.
//
// It is a module of its own, outside go.work, built with GOWORK=off
// (Makefile STANDALONE): the SDK's requirements (gRPC v1.83.2, genproto,
// OpenTelemetry v1.45.0) would otherwise raise the root module's build
// list, which the simulator, importing only the standard library,
// test/cloudsim packages and golang.org/x/time, does not need
// (plugins/gce/doc.go). It imports the root module's gcesim and the SDK,
// and holds tests only.
package sdktest
