package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"
)

// Port is the agent's gRPC port.
const Port = 6421

// Keep-alive of the host's connections to agents: the host pings an idle
// connection every KeepaliveTime and drops it when no answer comes within
// KeepaliveTimeout, so a cell that went silent (its packets dropped, no
// reset; an agent or a process that dies is noticed at once, by its
// connection's reset) is noticed within their sum, 45 s: the values of
// client-go's own health check of its connections to the API server
// (HTTP/2 pings after 30 s without a frame, 15 s for the answer), and
// within the 50 s the node lifecycle controller gives a silent kubelet
// (--node-monitor-grace-period).
// With a thousand cells the pings were kip's largest idle cost at 10 s
// (docs/benchmarks.md). The agent allows pings as often as every
// KeepaliveMinTime (its enforcement policy's MinTime), even without
// streams, so that a host of an earlier release, which pinged every 10 s,
// is not refused.
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 15 * time.Second
	KeepaliveMinTime = 10 * time.Second
)

// BootstrapEnv names the environment variable holding the bootstrap file's
// path (the local plugin sets it; cloud cells get the file from user data).
const BootstrapEnv = "KIP_CELL_BOOTSTRAP"

// BootstrapVersion is the version of the Bootstrap format. Version 1
// carried the cell's certificate and private key; version 2 carries a join
// token instead (the agent makes its own key and joins, join.go).
const BootstrapVersion = 2

// Bootstrap is everything a cell agent needs to start: who it is, where to
// listen, the CA it trusts and the token it joins with. It is created by
// the host for each cell and delivered through the cloud plugin (user data;
// a file for local cells). It holds no private key: whoever reads it (user
// data stays readable for the instance's life) learns a token that is
// single-use and expires within the boot (see JoinToken).
type Bootstrap struct {
	Version   int    `json:"version"`
	CellID    string `json:"cellID"`
	ClusterID string `json:"clusterID"`
	NodeName  string `json:"nodeName"`
	// PodUID is the pod the cell is launched for; empty for a standby
	// cell of a warm pool, which the first ApplyPod binds to its pod for
	// good (the agent keeps that pod on its disk, so that a restarted
	// agent resumes it).
	PodUID string `json:"podUID"`
	// ListenAddress is host:port for the agent's gRPC server; empty means
	// all addresses on Port.
	ListenAddress string `json:"listenAddress,omitempty"`
	// CACert is the cluster CA (PEM); the agent trusts host certificates
	// it signed.
	CACert string `json:"caCert"`
	// JoinToken is what the agent presents, with a certificate request for
	// its own key, when the host joins it (cell.proto's Join service). The
	// host accepts it once, for this cell, until it expires.
	JoinToken string `json:"joinToken"`
	// InsecureRegistries are registry hosts (host or host:port) the agent
	// pulls from over plain HTTP; loopback hosts always are.
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`
}

var cellIDRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidCellID reports whether id can name a cell: a DNS label, since it is
// the DNS name in the cell's certificate.
func ValidCellID(id string) bool { return cellIDRE.MatchString(id) }

// Validate checks that every field a cell needs is there.
func (b *Bootstrap) Validate() error {
	var errs []error
	if b.Version == 1 {
		return errors.New("version 1 carries the cell's private key, which this agent no longer accepts: it makes its own key and joins (version 2); run a kip host as new as this agent")
	}
	if b.Version != BootstrapVersion {
		errs = append(errs, fmt.Errorf("version %d, want %d", b.Version, BootstrapVersion))
	}
	if !ValidCellID(b.CellID) {
		errs = append(errs, fmt.Errorf("cellID %q is not a DNS label", b.CellID))
	}
	for name, v := range map[string]string{"caCert": b.CACert, "joinToken": b.JoinToken} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", name))
		}
	}
	return errors.Join(errs...)
}

// Marshal encodes the bootstrap as JSON.
func (b *Bootstrap) Marshal() ([]byte, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding bootstrap: %w", err)
	}
	return data, nil
}

// ParseBootstrap decodes and validates a bootstrap document.
func ParseBootstrap(data []byte) (*Bootstrap, error) {
	var b Bootstrap
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("parsing bootstrap: %w", err)
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("invalid bootstrap: %w", err)
	}
	return &b, nil
}

// ReadBootstrap reads and validates the bootstrap file at path.
func ReadBootstrap(path string) (*Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading bootstrap: %w", err)
	}
	return ParseBootstrap(data)
}
