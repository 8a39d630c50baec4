//go:build pins

// Package pins is never built (its build tag is never set); it exists so
// that `go mod tidy` keeps module pins that nothing imports otherwise.
//
// google.golang.org/genproto: old gRPC and protobuf releases deep in the
// module graph still require the monolithic genproto of 2020, whose
// googleapis packages now live in split modules; without a newer pin, tidy
// and builds fail with "ambiguous import" (research: containerd.md §1.3).
package pins

import _ "google.golang.org/genproto/protobuf/field_mask"
