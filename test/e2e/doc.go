// Package e2e holds Kip's end-to-end tests. They run against a real control
// plane (built from source and cached, started once per run by TestMain)
// and only with the e2e build tag: make e2e, or
//
//	go test -tags e2e -race ./test/e2e/...
package e2e
