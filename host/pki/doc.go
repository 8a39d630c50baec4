// Package pki is the host's certificate authority. The cluster CA lives in
// a Kubernetes Secret (see Load), so every host replica shares it and the
// host itself stays stateless; the first replica to start creates it and
// nobody ever overwrites it.
//
// A cell's bootstrap document (Bootstrap) carries the CA certificate and a
// join token (JoinToken), never a key: the cell's agent makes its own, and
// when the host joins it, Join checks the agent's request (the token is
// this CA's, the cell's, not expired and not spent for another key; the
// certificate request is for the key the agent serves and names the cell
// alone; the caller's check, the plugin's instance identity, passes) and
// signs a server certificate whose DNS name is the cell ID (SignCell).
// Tokens are MACs under a key derived from the CA's, so any replica, and a
// restarted host, verifies them without a store. Which ones were spent is
// kept in memory until they expire, with which key each cell was seen
// joined (SawJoined): a restarted host learns the latter again from the
// cells, and refuses tokens issued before to any other key (Join says
// what that leaves open).
//
// A cell certificate lives DefaultCellValidity (30 days); the host renews
// it well before (host/cells: at about two thirds of its life) over its
// connection to the agent, and Renew signs a certificate for the agent's
// new key on the evidence of the certificate it served there: a current
// one of this CA for the cell, or one that expired within
// ExpiredRenewalGrace once the plugin's identity check passes (a kip
// that was away longer than the renewal's margin). Renew says why that
// is safe enough, and what it leaves open.
//
// For itself the host has a client certificate with common name
// api.HostCommonName, kept fresh in memory (HostCertificate: a day, a
// new one after two thirds of it, and one per start). The CA itself lives
// CAValidity (10 years) and is never renewed by kip: its certificate
// caps every certificate it signs, and once it has expired Load refuses
// it; replacing it is an operator's job, and a new CA reaches no cell
// launched before: each trusts only the CA of its bootstrap.
// ClientTLSConfig ties the two together: the host verifies on every
// connection that the peer's certificate names the cell it means to reach;
// JoinTLSConfig is the join's, which pins the agent's self-signed one.
//
// Config (the pki section of kip.yaml) says where the Secret is.
//
// It imports the standard library, client-go (with k8s.io/api and
// apimachinery) and cell/api only.
package pki
