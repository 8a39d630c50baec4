// Package boottime remembers how long a plugin's last instances took from
// launch to running, so that its event watcher can sleep through most of
// a boot instead of polling the cloud every second: the aws and gce
// plugins poll fast only from shortly before the quickest of the last
// boots may have ended. A third party's plugin may do the same.
//
// The package imports only the standard library.
package boottime
