package scale

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// AuditPolicy is the API server's audit policy for the benchmark: one
// event per request made by a node (group system:nodes) or one of users,
// written when the request is received, so that a watch still open counts
// as soon as it starts; nothing for anyone else. Metadata is the least
// level that names the user, verb and resource.
func AuditPolicy(users []string) string {
	policy := `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
`
	if len(users) > 0 {
		quoted, _ := json.Marshal(users) // a JSON list is a YAML flow sequence
		policy += "- level: Metadata\n  users: " + string(quoted) + "\n"
	}
	return policy + "- level: None\n"
}

// AuditArgs writes AuditPolicy(users) into dir and returns the
// kube-apiserver flags that log by it, as JSON lines, to the file it also
// returns.
func AuditArgs(dir string, users []string) (args []string, logPath string, err error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy(users)), 0o600); err != nil {
		return nil, "", fmt.Errorf("writing the audit policy: %w", err)
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		// Blocking: each event is written before the request goes on, so
		// that the log read after a phase holds that phase's requests.
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
	}, logPath, nil
}

// Requests counts one user's API requests: in all, and by verb and
// resource ("create pods", "patch pods/status", "get leases").
type Requests struct {
	Total  int
	ByKind map[string]int
}

// Add adds o's counts to r.
func (r *Requests) Add(o Requests) {
	r.Total += o.Total
	for k, n := range o.ByKind {
		if r.ByKind == nil {
			r.ByKind = map[string]int{}
		}
		r.ByKind[k] += n
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event that CountRequests
// reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestURI string `json:"requestURI"`
}

// CountRequests counts the RequestReceived events of user in r, an audit
// log of JSON lines (AuditArgs's). A request without a resource (a
// discovery call) counts by its verb and URI.
func CountRequests(r io.Reader, user string) (Requests, error) {
	reqs := Requests{ByKind: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return Requests{}, fmt.Errorf("parsing an audit event: %w", err)
		}
		if ev.User.Username != user || ev.Stage != "RequestReceived" {
			continue
		}
		kind := ev.Verb + " " + ev.RequestURI
		if ev.ObjectRef != nil && ev.ObjectRef.Resource != "" {
			kind = ev.Verb + " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				kind += "/" + ev.ObjectRef.Subresource
			}
		}
		reqs.Total++
		reqs.ByKind[kind]++
	}
	if err := sc.Err(); err != nil {
		return Requests{}, fmt.Errorf("reading the audit log: %w", err)
	}
	return reqs, nil
}

// AuditLog is an audit log that grows while it is read, phase by phase.
type AuditLog struct {
	Path string
}

// Offset returns the log's size now: the start of the next phase.
func (a AuditLog) Offset() (int64, error) {
	st, err := os.Stat(a.Path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the audit log's size: %w", err)
	}
	return st.Size(), nil
}

// Count counts user's requests in the log between offsets from and to.
func (a AuditLog) Count(user string, from, to int64) (Requests, error) {
	if to <= from {
		return Requests{ByKind: map[string]int{}}, nil
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return Requests{}, fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	return CountRequests(io.NewSectionReader(f, from, to-from), user)
}
