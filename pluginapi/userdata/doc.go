// Package userdata is the format in which a cloud plugin hands a cell its
// bootstrap through the instance's user data: a MIME multipart/mixed
// document with an optional text/cloud-config part (the cell boot recipe,
// which cloud-init runs) and an application/vnd.kipcell.bootstrap+json
// part (the bootstrap from LaunchRequest.Bootstrap, verbatim). Build writes
// it, deterministically, so that a retried launch carries the same bytes;
// Bootstrap reads the bootstrap part back, as kip-cell --bootstrap does on
// the instance and as cloud simulators do.
//
// It imports only the standard library.
package userdata
