// Package kit is what a cloud plugin's provider is built from, beside the
// contract (pluginapi) and the snapshot of its instances
// (pluginapi/snapshot): the parts the aws, gce and azure plugins share
// and a third party's cloud plugin may take as they are.
//
//   - Base is the provider's skeleton: its log, the seams tests replace
//     (the clock, the sleep), the timings of Describe, List and
//     WatchEvents with their defaults, and the boot times the event
//     watcher learns. A provider embeds *Base (NewBase).
//   - Configured holds the configuration Configure stored, swapped whole,
//     and answers a call before Configure with the plugin's NotConfigured
//     error (Get, Ready).
//   - Info answers GetInfo (Info.GetInfo) from the plugin's name,
//     version, capabilities, configuration schema and embedded catalog.
//   - Offerings answers ListInstanceTypes from the embedded catalog, for
//     one configuration: its region and zones, the image's architecture,
//     and where the cloud sells each type; Sold caches that answer of the
//     cloud (one fetch at a time, kept for a TTL, a refusal for want of
//     permission logged once and taken as "everything is sold").
//   - List and Describe answer List and Describe from the plugin's
//     snapshot.View; LookupEach is Describe's lookup of the instances
//     outside the cluster for a cloud that gets one instance a call.
//   - Changes is the event watcher's diff of two snapshots: the state
//     changes to send, instances gone, and the boots to time.
//   - FieldRule and RefusedField tell which configuration key or request
//     field a cloud's refusal of a launch names, from its text;
//     IsContextError and NotAnAPIError map the errors of a cloud call
//     that are not the cloud's answer.
//
// What stays the cloud's: its SDK's clients and error types (each
// plugin's mapError, which reads them), its instance type (the view's T),
// what its refusals and interruptions look like, and its own timings.
//
// The package imports the standard library and pluginapi's own packages.
package kit
