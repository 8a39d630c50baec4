package plugin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("plugin", "fake")
	root := newHCLog(log, "kip-plugin-fake")
	fromPlugin := root.Named("kip-plugin-fake")

	tests := []struct {
		name string
		log  func()
		want map[string]any
	}{
		{
			name: "plugin record keeps level, message, attributes",
			log: func() {
				fromPlugin.Warn("launch slow", "cell", "c1", "took", 2.5, "timestamp", "2026-01-02T03:04:05.000Z")
			},
			want: map[string]any{"level": "WARN", "msg": "launch slow", "plugin": "fake", "cell": "c1", "took": 2.5, "time": "2026-01-02T03:04:05Z"},
		},
		{
			name: "plugin error",
			log:  func() { fromPlugin.Error("boom", "err", "x") },
			want: map[string]any{"level": "ERROR", "msg": "boom", "plugin": "fake", "err": "x"},
		},
		{
			name: "go-plugin chatter at debug",
			log:  func() { root.Info("plugin process exited", "id", "42") },
			want: map[string]any{"level": "DEBUG", "msg": "plugin process exited", "plugin": "fake", "logger": "go-plugin", "id": "42"},
		},
		{
			name: "go-plugin sub-logger and implied args",
			log:  func() { root.Named("stdio").With("k", "v").Error("stdio broke") },
			want: map[string]any{"level": "DEBUG", "msg": "stdio broke", "plugin": "fake", "logger": "go-plugin.stdio", "k": "v"},
		},
		{
			name: "plugin trace",
			log:  func() { fromPlugin.Trace("deep") },
			want: nil, // below the handler's debug level
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf.Reset()
			tt.log()
			if tt.want == nil {
				if buf.Len() != 0 {
					t.Fatalf("logged %s, want nothing", buf.String())
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("log output %q: %v", buf.String(), err)
			}
			if _, ok := tt.want["time"]; !ok {
				delete(got, "time")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}

	if got := fromPlugin.GetLevel(); got != hclog.Debug {
		t.Errorf("GetLevel() = %v, want debug", got)
	}
	buf.Reset()
	root.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERROR] yamux: oops")
	if !strings.Contains(buf.String(), `"msg":"yamux: oops"`) || !strings.Contains(buf.String(), `"level":"DEBUG"`) {
		t.Errorf("standard logger wrote %s", buf.String())
	}
}
