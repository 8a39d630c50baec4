// Package identity holds what a cell's agent and a cloud plugin must agree
// on about a cell's signed instance identity
// (pluginapi.InstanceIdentityVerifier) beyond the bytes the join carries:
// the audience an agent asks its cloud's identity token for (Compute
// Engine's metadata server mints a token for any audience the instance
// names), which the plugin checks.
//
// It imports only the standard library.
package identity
