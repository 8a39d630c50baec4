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
	defer klogTarget.Store(klogTarget.Load())
	bridgeKlog(slog.New(slog.NewJSONHandler(out, nil)))

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

// TestBridgeKlogAgainWhileKlogLogs is host/cli's race: a second Run (a
// second kip command in one test process) bridged klog while gRPC
// goroutines of the first still logged through it. The race detector
// fails it when bridgeKlog writes klog's logger. The last Run's logger
// gets what is logged after it.
func TestBridgeKlogAgainWhileKlogLogs(t *testing.T) {
	defer klogTarget.Store(klogTarget.Load())
	bridgeKlog(slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if klog.V(4).Enabled() {
				klog.V(4).Info("from an earlier run")
			}
			klog.Info("from an earlier run")
		}
	}()
	var second strings.Builder
	bridgeKlog(slog.New(slog.NewTextHandler(&second, nil)))
	<-done
	klog.InfoS("after the second run started", "lease", "kip")
	klog.Flush()
	if got := second.String(); !strings.Contains(got, `msg="after the second run started" component=client-go lease=kip`) {
		t.Errorf("the second run's logger got:\n%s\nwant the record logged after it, with component client-go", got)
	}
}
