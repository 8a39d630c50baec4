// Package gce holds the tests of the files that deploy Kip on Compute
// Engine (README.md): they run the cells' boot recipe, startup.sh, with
// stand-ins for curl, the metadata server, dpkg and iptables. It has no
// code of its own and imports only the standard library; the custom IAM
// role (role.yaml) is kept equal to the plugin's calls by plugins/gce's
// tests.
package gce
