// Package ratelimit is a token bucket for a plugin's client-side rate limit
// of cloud API calls: every call takes a token, waiting when none is left,
// so that the plugin never sends more than its bucket allows, however many
// goroutines call at once. The aws, gce and azure plugins put one bucket
// per category of calls (reads, mutations) in front of every API call; a
// third party's plugin may do the same.
//
// Config is the rateLimit setting that configures the two buckets, the
// same keys in every plugin (readPerSecond, mutatePerSecond, burst): a
// field of the plugin's configuration struct (pluginapi.DecodeConfig),
// checked and defaulted by Config.Check with the plugin's own defaults.
//
// The package imports the standard library and pluginapi (for Config's
// InvalidConfig errors).
package ratelimit
