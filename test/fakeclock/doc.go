// Package fakeclock is a clock tests move by hand, read by several
// goroutines at once: a certificate authority, a cell's agent and the
// host that renews its certificate all see the same time.
//
// It imports only the standard library.
package fakeclock
