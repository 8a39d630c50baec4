// Package ratelimit is a token bucket for a plugin's client-side rate limit
// of cloud API calls: every call takes a token, waiting when none is left,
// so that the plugin never sends more than its bucket allows, however many
// goroutines call at once. The aws and gce plugins put one bucket per
// category of calls (reads, mutations) in front of every API call; a third
// party's plugin may do the same.
//
// The package imports only the standard library.
package ratelimit
