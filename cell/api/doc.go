// Package api is the contract between the kip host and the cell agent
// (kip-cell): the protocol's calls and types as Go (cell.go), the bootstrap
// document a cell starts from, the join that gives a cell its certificate,
// and the mutual-TLS configuration of both ends.
//
// The protocol is gRPC (proto/kip/cell/v1/cell.proto), but neither end
// sees its generated code, which is internal to this package
// (internal/cellv1), as pluginapi keeps its own: the agent implements the
// Cell and JoinService interfaces and serves them with RegisterCell and
// RegisterJoin; the host calls them through NewClient and NewJoinClient.
// The converters between the Go types and the wire (convert.go) are
// checked to carry every field both ways, so a field added to the proto
// and not to a Go type, or the other way round, fails a test. Errors are
// gRPC status errors, whose codes each call documents.
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
// Its subpackages are what host and cell share besides: the container
// logs' format (logs: the agent writes it, the host reads the logs it
// keeps), the kubelet's $(VAR) expansion and its sysctl names.
//
// It imports the standard library, gRPC and protobuf only: host and cell
// both import it, and it imports neither.
package api
