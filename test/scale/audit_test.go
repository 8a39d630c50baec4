package scale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Events as kube-apiserver writes them with AuditPolicy (shortened).
const auditLines = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/api/v1/namespaces/ns/pods/p-0001/status","verb":"patch","user":{"username":"system:node:mock-100","groups":["system:nodes","system:authenticated"]},"objectRef":{"resource":"pods","namespace":"ns","name":"p-0001","apiVersion":"v1","subresource":"status"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/api/v1/namespaces/ns/pods/p-0002/status","verb":"patch","user":{"username":"system:node:mock-100","groups":["system:nodes"]},"objectRef":{"resource":"pods","namespace":"ns","name":"p-0002","apiVersion":"v1","subresource":"status"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/mock-100","verb":"update","user":{"username":"system:node:mock-100","groups":["system:nodes"]},"objectRef":{"resource":"leases","namespace":"kube-node-lease","name":"mock-100","apiGroup":"coordination.k8s.io","apiVersion":"v1"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/api/v1/namespaces/ns/pods/p-0001","verb":"delete","user":{"username":"system:node:mock-300","groups":["system:nodes"]},"objectRef":{"resource":"pods","namespace":"ns","name":"p-0001","apiVersion":"v1"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods/p-0001/status","verb":"patch","user":{"username":"system:node:mock-100","groups":["system:nodes"]},"objectRef":{"resource":"pods","subresource":"status"}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/api?timeout=32s","verb":"get","user":{"username":"system:node:mock-100","groups":["system:nodes"]}}
`

func TestCountRequests(t *testing.T) {
	tests := []struct {
		name, user, log string
		want            Requests
	}{
		{"one node's received requests", "system:node:mock-100", auditLines, Requests{Total: 4, ByKind: map[string]int{
			"patch pods/status": 2, "update leases": 1, "get /api?timeout=32s": 1,
		}}},
		{"another node", "system:node:mock-300", auditLines, Requests{Total: 1, ByKind: map[string]int{"delete pods": 1}}},
		{"nobody's", "system:node:kip", auditLines, Requests{ByKind: map[string]int{}}},
		{"an empty log", "system:node:mock-100", "", Requests{ByKind: map[string]int{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CountRequests(strings.NewReader(tt.log), tt.user)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CountRequests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCountRequestsNotJSON(t *testing.T) {
	if _, err := CountRequests(strings.NewReader("I0101 not an event\n"), "system:node:x"); err == nil {
		t.Error("CountRequests of a line that is not JSON = nil error, want one")
	}
}

// TestAuditLogPhases checks that Count reads only the lines written
// between two offsets.
func TestAuditLogPhases(t *testing.T) {
	a := AuditLog{Path: filepath.Join(t.TempDir(), "audit.log")}
	if off, err := a.Offset(); err != nil || off != 0 {
		t.Fatalf("Offset of a log not yet written = %d, %v; want 0, nil", off, err)
	}
	lines := strings.SplitAfter(auditLines, "\n")
	if err := os.WriteFile(a.Path, []byte(lines[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	from, err := a.Offset()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.Path, []byte(lines[0]+lines[1]+lines[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	to, err := a.Offset()
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Count("system:node:mock-100", from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := Requests{Total: 2, ByKind: map[string]int{"patch pods/status": 1, "update leases": 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Count (-want +got):\n%s", diff)
	}
}

func TestRequestsAdd(t *testing.T) {
	var r Requests
	r.Add(Requests{Total: 2, ByKind: map[string]int{"patch pods/status": 2}})
	r.Add(Requests{Total: 3, ByKind: map[string]int{"patch pods/status": 1, "update leases": 2}})
	want := Requests{Total: 5, ByKind: map[string]int{"patch pods/status": 3, "update leases": 2}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
}

func TestAuditPolicy(t *testing.T) {
	want := `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: Metadata
  users: ["system:serviceaccount:default:virtual-kubelet"]
- level: None
`
	if diff := cmp.Diff(want, AuditPolicy([]string{MockUser})); diff != "" {
		t.Errorf("AuditPolicy (-want +got):\n%s", diff)
	}
	if got := AuditPolicy(nil); strings.Contains(got, "users:") {
		t.Errorf("AuditPolicy(nil) names users:\n%s", got)
	}
}
