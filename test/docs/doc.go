// Package docs holds the tests that keep README.md and docs/ true of the
// repository: the README stays short enough to read in ten minutes,
// every relative link of README.md and docs/*.md reaches a file (and its
// anchor a heading of that page), docs/README.md lists every page, every
// `make` target and Kip binary the README quotes exists, and the commands
// docs/benchmarks.md quotes still name benchmarks, tests and make targets
// that exist.
//
// It has no code of its own; its tests read the repository's files from
// disk and import host/cli to read kip's commands.
package docs
