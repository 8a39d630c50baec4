package simhttp

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
)

func TestEndpoint(t *testing.T) {
	var e Endpoint
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	log := slog.New(slog.DiscardHandler)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	url, err := e.Start(h, "test simulator", log)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if again, _ := e.Start(h, "test simulator", log); again != url || e.URL() != url {
		t.Errorf("second Start = %q, URL = %q; want %q both", again, e.URL(), url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "ok" {
		t.Errorf("body %q, want ok", body)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if resp, err := http.Get(url); err == nil {
		_ = resp.Body.Close()
		t.Errorf("GET after Stop succeeded, want the connection refused")
	}
}
