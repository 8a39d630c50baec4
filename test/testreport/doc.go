// Package testreport makes the test budget visible: it runs each step of
// make check (a `go test -json` pass, or any command), shows its output as
// go test would without -v (a package's result, a failed test's whole
// output; with Tests, a line for each top-level test as it ends), and
// records the step's wall time and every test's in a report directory;
// Summary prints, from that directory, each step's time and the slowest
// tests, which make check shows at its end.
//
// Files in the report directory, per step NAME (spaces and slashes become
// dashes in file names):
//
//	NAME.step.json   the step: its name, command, start, end and exit code
//	NAME.events.json the go test -json events it printed, one a line
//
// It imports only the standard library; test/cmd/kip-testreport is its
// command.
package testreport
