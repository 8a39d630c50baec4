// Package syncbuf is a buffer that tests read while other goroutines write
// it: a logger's output, a command's or a container's stdout and stderr.
//
// It imports only the standard library.
package syncbuf
