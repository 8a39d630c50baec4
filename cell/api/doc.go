// Package api is the contract between the kip host and the cell agent
// (kip-cell): the gRPC service in cellv1 (generated from
// proto/kip/cell/v1/cell.proto), the bootstrap document a cell starts from,
// and the mutual-TLS configuration of both ends.
//
// The host dials the agent; the agent's certificate carries the cell ID as
// its DNS name, so the host checks on every connection that it talks to the
// cell it means, and the agent accepts only client certificates for the
// host from the same cluster CA.
//
// It imports the standard library, gRPC and protobuf only: host and cell
// both import it, and it imports neither.
package api
