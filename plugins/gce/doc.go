// Package gce will be Kip's Google Compute Engine cloud plugin (issue 16):
// a cell is one Compute Engine instance, launched with instances.insert,
// found again by its labels and ended with instances.delete. It is not
// written yet; today the package holds only what pins its SDK, and the
// catalog (plugins/gce/catalog).
//
// # The SDK and the build list
//
// The plugin uses cloud.google.com/go/compute v1.74.0 (apiv1, the REST
// clients) with google.golang.org/api v0.288.0, the version compute
// requires (at most v0.309.0 may be used: v0.310.0 and later, like compute
// v1.74.1, need genproto versions the module proxy cannot serve; see
// ../shared/research/cloud-sdks.md §2.1). sdk_test.go drives the real
// InstancesRESTClient against a local endpoint, so go mod tidy keeps the
// requirement for a reason that make verify checks (vet, lint, the test),
// and no binary links the SDK until the plugin does.
//
// That SDK cannot share go.work's single build list with the root module:
// compute v1.74.0 requires, among others, google.golang.org/grpc v1.83.2,
// google.golang.org/genproto (and googleapis/api)
// v0.0.0-20260715232425-e75dac1f907d, go.opentelemetry.io/otel v1.45.0 and
// otelhttp v0.67.0, cloud.google.com/go v0.123.0 and go-logr v1.4.4, where
// the root module (kip, kip-cell) resolves grpc v1.79.3, genproto
// v0.0.0-20231211222908-989df2bf70f3, googleapis/api
// v0.0.0-20251202230838-ff82c1b0f217, otel v1.43.0, otelhttp v0.61.0,
// cloud.google.com/go v0.110.10 and go-logr v1.4.3. In one workspace the
// minimum version selection would move kip's gRPC, OpenTelemetry and
// genproto (and about 150 other lines of `go list -m all`) for a plugin
// kip never links. So this module is not in go.work: the Makefile lists it
// in STANDALONE and vets, lints, tidies, tests and builds it with
// GOWORK=off, as a third party's plugin module is built; it requires
// pluginapi v1.0.0, replaced by the checkout, like every plugin. The two
// sides meet only over go-plugin's gRPC wire protocol, which does not
// depend on both ends linking the same grpc-go. The same holds for the
// simulator's client tests (test/cloudsim/gce/sdktest, its own module), so
// the root module's build list stays as it was.
//
// The package imports pluginapi, its own catalog and the Google Cloud SDK;
// never host, cell, Kubernetes or another plugin (hack/depcheck.sh).
package gce
