// Package pki is the host's certificate authority. The cluster CA lives in
// a Kubernetes Secret (see Load), so every host replica shares it and the
// host itself stays stateless; the first replica to start creates it and
// nobody ever overwrites it.
//
// From the CA the host issues, for each cell, a server certificate whose
// DNS name is the cell ID (IssueCell), delivered to the cell in its
// bootstrap document (Bootstrap), and for itself a client certificate with
// common name api.HostCommonName, kept fresh in memory (HostCertificate).
// ClientTLSConfig ties the two together: the host verifies on every
// connection that the peer's certificate names the cell it means to reach.
//
// Config (the pki section of kip.yaml) says where the Secret is.
//
// It imports the standard library, client-go (with k8s.io/api and
// apimachinery) and cell/api only.
package pki
