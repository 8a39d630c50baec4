// Package pluginapi is Kip's cloud-plugin contract and the Go SDK for
// writing a plugin.
//
// A cloud plugin is a separate binary, kip-plugin-<name>, that the kip host
// starts as a subprocess and talks to over gRPC (hashicorp/go-plugin,
// protocol kip.plugin.v1). The plugin knows one cloud's compute API; the
// host knows Kubernetes. A plugin author:
//
//  1. implements Provider (provider.go: every call, its request and
//     response, and its idempotency and retry rules), returning the error
//     kinds of errors.go;
//  2. writes main as one call: pluginapi.Serve(mycloud.New);
//  3. runs the conformance suite in a test: plugintest.Run(t, factory, config).
//
// # Configuration
//
// A plugin's configuration (ConfigureRequest.Config, the plugin.config
// section of kip.yaml) is one Go struct, and each key is written once, in
// it: DecodeConfig decodes the JSON into the struct strictly, naming the
// key of every refusal, and ConfigSchema renders the struct's JSON Schema
// for GetInfoResponse.ConfigSchema. (DecodeConfigObject, which decodes one
// object key by key into a map of targets, is the older way and stays.)
//
// A field's key is its json tag's name (the field's name without one; "-"
// skips it). A field is a string, a bool, an integer, a float, a pointer
// to one of those (nil: absent), []string, map[string]string, a struct or
// a pointer to one (a nested object; the pointer stays nil when the key is
// absent), or a slice of structs (an array of objects). An embedded struct
// without a json name lends its keys to the object it is embedded in, as
// in encoding/json. The schema's words for a key come from tags named for
// them:
//
//	doc:"…"              the key's description
//	required:"true"      the key is in its object's required list
//	pattern:"…"          a string's pattern
//	enum:"a,b,c"         a string's allowed values
//	deprecated:"true"    the key is an old name, still taken
//	minimum, maximum, exclusiveMinimum, minLength, maxLength, minItems,
//	uniqueItems, maxProperties: that keyword, the tag's value a JSON
//	literal (minimum:"1", uniqueItems:"true")
//
// On a []string or a map[string]string, pattern, minLength and maxLength
// constrain its items (its values). Defaults are not tags: ConfigSchema
// reads them from a value of the struct, the one the plugin applies its
// defaults from (a bool's default is false unless that value says true).
// A struct that requires one of several sets of keys implements
// ConfigAlternatives. The schema documents; DecodeConfig checks only keys
// and JSON types, and values stay the plugin's to check, naming the key
// with NewInvalidConfig; ConfigPattern compiles a key's pattern tag, so
// that the check and the schema share the one pattern. A plugin's rateLimit key is ratelimit.Config, the
// same keys in every plugin.
//
// # The kit
//
// Below the contract, packages a cloud plugin is built from: snapshot (one
// coalesced listing of the cluster's instances behind Describe, List and
// WatchEvents), ratelimit (the token buckets in front of the cloud's API,
// and the rateLimit key), boottime (the boots an event watcher times),
// catalog (the embedded instance-type catalog) and kit, which puts them
// together: the provider's skeleton of seams and timings (kit.Base), its
// configuration (kit.Configured), GetInfo, ListInstanceTypes, List,
// Describe and the event watcher's state changes, so that a cloud plugin
// writes only what is its cloud's (the aws, gce and azure plugins are
// built on it).
//
// The wire contract is proto/kip/plugin/v1/plugin.proto; its generated Go
// code is internal, behind the Go types here, so authors never depend on it.
// The host side uses PluginSets, Handshake and GRPCDialOptions to start and
// dispense a plugin, and gets a Client whose answers are validated.
//
// This module imports only the standard library, gRPC, protobuf, go-plugin
// and hclog: never the host, the cell agent, client-go or any plugin.
package pluginapi
