package gcesim

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const (
	testProject = "kip-test"
	testZone    = "us-central1-a"
)

// newClock is a manual clock for Options.Now.
func newClock() *cellstest.Clock {
	return cellstest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
}

// eventually polls cond for a few seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// testSim is a started simulator and a plain JSON client of it.
type testSim struct {
	*Server
	t   *testing.T
	url string
}

func startSim(t *testing.T, opts Options) *testSim {
	t.Helper()
	opts.Project = testProject
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := New(opts)
	url, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &testSim{Server: s, t: t, url: url + "/compute/v1/projects/" + testProject + "/"}
}

// do sends a request to path (after projects/{project}/) and decodes the
// JSON answer.
func (s *testSim) do(method, path string, body any) (int, map[string]any) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		s.t.Fatalf("%s %s: decoding: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// insertBody is an instance resource as the plugin sends it.
func insertBody(name, machineType, model, action, bootstrap string) map[string]any {
	b := map[string]any{
		"name":        name,
		"machineType": "zones/" + testZone + "/machineTypes/" + machineType,
		"labels":      map[string]any{"kip-cell": name},
	}
	if model != "" {
		sched := map[string]any{"provisioningModel": model}
		if action != "" {
			sched["instanceTerminationAction"] = action
		}
		b["scheduling"] = sched
	}
	if bootstrap != "" {
		b["metadata"] = map[string]any{"items": []any{
			map[string]any{"key": "startup-script", "value": "#!/bin/sh"},
			map[string]any{"key": BootstrapKey, "value": bootstrap},
		}}
	}
	return b
}

// insert inserts an instance and returns the operation answered.
func (s *testSim) insert(body map[string]any, requestID string) (int, map[string]any) {
	s.t.Helper()
	path := "zones/" + testZone + "/instances"
	if requestID != "" {
		path += "?requestId=" + requestID
	}
	return s.do(http.MethodPost, path, body)
}

func (s *testSim) get(name string) (int, map[string]any) {
	s.t.Helper()
	return s.do(http.MethodGet, "zones/"+testZone+"/instances/"+name, nil)
}

// status is the instance's status, or "" when get is notFound.
func (s *testSim) status(name string) string {
	s.t.Helper()
	code, in := s.get(name)
	if code == http.StatusNotFound {
		return ""
	}
	if code != http.StatusOK {
		s.t.Fatalf("get %s: %d %v", name, code, in)
	}
	st, _ := in["status"].(string)
	return st
}

// reason is the first reason and the domain of an error answer.
func reason(body map[string]any) (string, string) {
	e, _ := body["error"].(map[string]any)
	errs, _ := e["errors"].([]any)
	if len(errs) == 0 {
		return "", ""
	}
	first, _ := errs[0].(map[string]any)
	r, _ := first["reason"].(string)
	d, _ := first["domain"].(string)
	return r, d
}

// nic0Alias is the ipCidrRange of nic0's first alias IP range, or "".
func nic0Alias(in map[string]any) string {
	cidr, _ := firstItem(firstItem(in, "networkInterfaces"), "aliasIpRanges")["ipCidrRange"].(string)
	return cidr
}

// nic0IP is the instance's nic0 networkIP.
func nic0IP(in map[string]any) string {
	ip, _ := firstItem(in, "networkInterfaces")["networkIP"].(string)
	return ip
}
