package simhttp

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// get answers GET / over the unix socket at path.
func get(path string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Get("http://metadata/")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestSockets: a key is served at the path given, or in the Sockets'
// own directory; Stop removes its socket, Close the rest and the
// directory.
func TestSockets(t *testing.T) {
	s := Sockets{Prefix: "simhttp-test-"}
	answer := func(text string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, text) })
	}
	given := filepath.Join(t.TempDir(), "given.sock")
	if err := os.WriteFile(given, nil, 0o600); err != nil { // left by an earlier simulator
		t.Fatal(err)
	}
	if err := s.Serve("a", given, answer("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve("b", "", answer("b")); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a": "a", "b": "b"} {
		path, ok := s.Path(key)
		if !ok {
			t.Fatalf("no path for %s", key)
		}
		if got, err := get(path); err != nil || got != want {
			t.Errorf("GET on %s's socket %s = %q, %v; want %q", key, path, got, err, want)
		}
	}
	if p, _ := s.Path("a"); p != given {
		t.Errorf("a is served at %s, want %s", p, given)
	}
	b, _ := s.Path("b")
	dir := filepath.Dir(b)

	s.Stop("a")
	s.Stop("a")
	if _, ok := s.Path("a"); ok {
		t.Error("a still has a path after Stop")
	}
	if _, err := os.Stat(given); !os.IsNotExist(err) {
		t.Errorf("a's socket is still there after Stop: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the socket directory %s is still there after Close: %v", dir, err)
	}
	if _, err := get(b); err == nil {
		t.Error("b still answers after Close")
	}
}
