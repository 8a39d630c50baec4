package api

// Kinds of the notices about a cell's instance that the agent reports in
// its status stream (InstanceNotice.Kind).
const (
	// NoticeInterruption: the cloud reclaims the instance at the notice's
	// time (EC2's spot two-minute warning).
	NoticeInterruption = "interruption"
	// NoticeRebalance: the cloud recommends replacing the instance soon
	// (EC2's rebalance recommendation); nothing happens to it yet.
	NoticeRebalance = "rebalance"
)
