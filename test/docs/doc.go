// Package docs holds tests that keep the Markdown documentation under docs/
// true of the repository: every link resolves to a file that exists and
// every anchor to a heading of its page, and the commands a page quotes
// still name benchmarks, tests and make targets that exist.
//
// It has no code of its own and imports nothing of Kip's; its tests read
// the repository's files from disk.
package docs
