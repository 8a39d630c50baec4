// Package imds is the cell agent's client of the EC2 instance metadata
// service (IMDS): IMDSv2 only (a session token from PUT /latest/api/token,
// kept until shortly before it expires and fetched again after a 401),
// over HTTP (http://169.254.169.254, EC2's address) or a unix socket
// (unix:///path: the EC2 simulator's per-instance IMDS,
// test/cloudsim/ec2). Get reads any path; IdentityDocument,
// InstanceAction and RebalanceRecommendation read the ones the agent
// uses: the signed identity document (for the cell's join) and the spot
// interruption notice and rebalance recommendation, which EC2 publishes
// only there (and in EventBridge).
//
// GCEClient reads Compute Engine's metadata server (NewGCE:
// http://metadata.google.internal, or a unix socket, the Compute Engine
// simulator's per instance): IdentityToken is the instance's identity
// token (instance/service-accounts/default/identity, format full), a JWT
// Google signs for an audience the caller names, which the agent sends
// with the cell's join on Compute Engine instead of EC2's document.
//
// Requests never go through a proxy (HTTP_PROXY does not apply to the
// link-local address).
//
// It imports the standard library only.
package imds
