// Package nfstest holds what Kip's NFS test servers share: go-nfs
// (github.com/willscott/go-nfs) over a directory of this machine, with the
// changes osfs alone does not serve. The test/images nfsserver program
// and cell/nfsfuse's tests use it.
package nfstest
