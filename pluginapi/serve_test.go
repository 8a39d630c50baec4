package pluginapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

// infoProvider answers GetInfo and nothing else.
type infoProvider struct {
	Provider // nil: any other call panics
	info     *GetInfoResponse
	err      error
}

func (p infoProvider) GetInfo(context.Context, *GetInfoRequest) (*GetInfoResponse, error) {
	return p.info, p.err
}

func factoryOf(p Provider) Factory { return func(*slog.Logger) Provider { return p } }

func TestServeDescribe(t *testing.T) {
	info := &GetInfoResponse{
		Name: "aws", Version: "1.4.0", APIVersions: []string{"1.0"},
		Capabilities: []Capability{CapabilitySpot, CapabilityWatchEvents},
	}
	var stdout, stderr bytes.Buffer
	code := serve([]string{"/usr/lib/kip/kip-plugin-aws", "describe"}, factoryOf(infoProvider{info: info}), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("describe exited %d, want 0; stderr: %s", code, stderr.String())
	}
	var got struct {
		Name         string   `json:"name"`
		Version      string   `json:"version"`
		APIVersions  []string `json:"apiVersions"`
		Capabilities []string `json:"capabilities"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("describe printed %q, not JSON: %v", stdout.String(), err)
	}
	want := struct {
		Name         string   `json:"name"`
		Version      string   `json:"version"`
		APIVersions  []string `json:"apiVersions"`
		Capabilities []string `json:"capabilities"`
	}{"aws", "1.4.0", []string{"1.0"}, []string{"spot", "watch-events"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("describe printed %+v, want %+v", got, want)
	}
}

func TestServeCommands(t *testing.T) {
	valid := infoProvider{info: &GetInfoResponse{Name: "x", Version: "1", APIVersions: []string{"1.0"}}}
	tests := []struct {
		name       string
		args       []string
		provider   Provider
		cookie     string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name: "unknown command", args: []string{"kip-plugin-x", "frobnicate"}, provider: valid,
			wantCode: 2, wantStderr: `unknown command "frobnicate"`,
		},
		{
			name: "no handshake cookie", args: []string{"/bin/kip-plugin-x"}, provider: valid,
			wantCode: 1, wantStderr: "kip-plugin-x is a Kip cloud plugin",
		},
		{
			name: "wrong handshake cookie", args: []string{"kip-plugin-x"}, provider: valid, cookie: "nope",
			wantCode: 1, wantStderr: "is a Kip cloud plugin: kip starts it as a subprocess",
		},
		{
			name: "help", args: []string{"kip-plugin-x", "--help"}, provider: valid,
			wantCode: 0, wantStdout: "kip-plugin-x describe",
		},
		{
			name: "describe with an invalid info", args: []string{"kip-plugin-x", "describe"},
			provider: infoProvider{info: &GetInfoResponse{Name: "x"}},
			wantCode: 1, wantStderr: "describing plugin: version is empty",
		},
		{
			name: "describe with a failing GetInfo", args: []string{"kip-plugin-x", "describe"},
			provider: infoProvider{err: errors.New("no credentials")},
			wantCode: 1, wantStderr: "describing plugin: no credentials",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(Handshake.MagicCookieKey, tt.cookie)
			var stdout, stderr bytes.Buffer
			code := serve(tt.args, factoryOf(tt.provider), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("serve(%q) exited %d, want %d", tt.args, code, tt.wantCode)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestNewLoggerWritesGoPluginJSON(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, "debug")
	before := time.Now().Add(-time.Second)
	log.Debug("probing", "cell", "c-1")
	log.Warn("launch slow", slog.Group("req", slog.String("msg", "nested stays")))
	lines := readLines(t, &buf)
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want 2: %v", len(lines), lines)
	}
	wants := []struct{ level, message string }{{"debug", "probing"}, {"warn", "launch slow"}}
	for i, line := range lines {
		if line["@level"] != wants[i].level || line["@message"] != wants[i].message {
			t.Errorf("line %d = %v, want @level %q and @message %q", i, line, wants[i].level, wants[i].message)
		}
		ts, ok := line["@timestamp"].(string)
		if !ok {
			t.Fatalf("line %d has no string @timestamp: %v", i, line)
		}
		parsed, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts)
		if err != nil {
			t.Errorf("@timestamp %q is not in go-plugin's layout: %v", ts, err)
		} else if parsed.Before(before) || parsed.After(time.Now().Add(time.Second)) {
			t.Errorf("@timestamp %v is not now", parsed)
		}
		for _, slogKey := range []string{"time", "level", "msg"} {
			if _, ok := line[slogKey]; ok {
				t.Errorf("line %d still has slog's %q key: %v", i, slogKey, line)
			}
		}
	}
	if lines[0]["cell"] != "c-1" {
		t.Errorf("attribute cell = %v, want c-1", lines[0]["cell"])
	}
	if req, _ := lines[1]["req"].(map[string]any); req["msg"] != "nested stays" {
		t.Errorf("grouped attribute = %v, want req.msg kept as is", lines[1]["req"])
	}
}

func TestNewLoggerLevels(t *testing.T) {
	tests := []struct {
		level string
		want  []string // levels that get through, of debug, info, warn, error
	}{
		{"debug", []string{"debug", "info", "warn", "error"}},
		{"TRACE", []string{"debug", "info", "warn", "error"}},
		{"info", []string{"info", "warn", "error"}},
		{"", []string{"info", "warn", "error"}},
		{"bogus", []string{"info", "warn", "error"}},
		{"warning", []string{"warn", "error"}},
		{"error", []string{"error"}},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log := NewLogger(&buf, tt.level)
			log.Debug("d")
			log.Info("i")
			log.Warn("w")
			log.Error("e")
			var got []string
			for _, line := range readLines(t, &buf) {
				got = append(got, line["@level"].(string))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("level %q let through %v, want %v", tt.level, got, tt.want)
			}
		})
	}
}

func readLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, line)
	}
	return lines
}
