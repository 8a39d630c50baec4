// Package api is the contract between the kip host and the cell agent
// (kip-cell): the gRPC services in cellv1 (generated from
// proto/kip/cell/v1/cell.proto), the bootstrap document a cell starts from,
// the join that gives a cell its certificate, and the mutual-TLS
// configuration of both ends.
//
// A cell joins; it is not handed a key. The bootstrap (bootstrap.go)
// carries the cluster CA, who the cell is and a join token, nothing
// secret for longer than the boot. The agent makes its own key (NewKey)
// and, until it has joined, serves a self-signed certificate of it
// (SelfSigned) and answers only the Join service. The host connects with
// JoinClientTLSConfig (its own client certificate, the agent's pinned),
// takes the agent's token and certificate request (NewCSR: the cell ID as
// only name) as a JoinRequest, has it checked and signed (host/pki), and
// hands the certificate back; the agent checks it (VerifyCellCertificate)
// and serves it. A refusal wraps ErrJoinRefused.
//
// From then on the host dials the agent with ClientTLSConfig: the agent's
// certificate carries the cell ID as its DNS name, so the host checks on
// every connection that it talks to the cell it means, and the agent
// (ServerTLSConfig), joined or not, accepts only client certificates for
// the host from the same cluster CA. Before the certificate expires the
// host renews it over its connection (the Join service's Renew: a new
// key, a RenewRequest the CA checks against the certificate the agent
// served, CompleteRenew). A certificate that expired anyway is still the
// cell's in every other way (CertifiedAs, ExpiredError), which is what
// the host renews it on.
//
// Every check of a certificate takes the time it judges at (the callers'
// clocks, which tests move); the TLS configurations' Time is the
// caller's to set.
//
// It imports the standard library, gRPC and protobuf only: host and cell
// both import it, and it imports neither.
package api
