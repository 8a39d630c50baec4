package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
)

// TestBridgeKlog checks that what client-go logs through klog, structured
// or not, reaches kip's logger as records with component client-go. klog
// is the process's: records of other tests' goroutines are left out.
func TestBridgeKlog(t *testing.T) {
	// A file, since goroutines of other tests (informers still
	// stopping) may log through klog at the same time.
	out, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	bridgeKlog(slog.New(slog.NewJSONHandler(out, nil)))
	defer klog.ClearLogger()

	klog.InfoS("successfully acquired lease", "lease", "kip-system/kip-kip")
	klog.Errorf("certificate_manager: %s", "failed while requesting a signed certificate")
	klog.Flush()

	var got []map[string]any
	logged, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(logged), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if msg, _ := rec["msg"].(string); msg != "successfully acquired lease" && !strings.HasPrefix(msg, "certificate_manager: ") {
			continue
		}
		delete(rec, "time")
		got = append(got, rec)
	}
	want := []map[string]any{
		{"level": "INFO", "msg": "successfully acquired lease", "component": "client-go", "lease": "kip-system/kip-kip"},
		{"level": "ERROR", "msg": "certificate_manager: failed while requesting a signed certificate", "component": "client-go"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}
