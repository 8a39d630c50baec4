package registry_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/test/registry"
	"github.com/kipcell/kip/test/syncbuf"
)

func start(t *testing.T, opts registry.Options) *registry.Registry {
	t.Helper()
	reg, err := registry.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return reg
}

// response is what the tests check of a reply: its status and headers.
type response struct {
	Status     string
	StatusCode int
	Header     http.Header
}

// get sends GET /v2/ (the registry's ping) to host, with credentials when
// user is not empty, and closes the reply's body.
func get(t *testing.T, host, user, pass string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+host+"/v2/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v2/: %v", err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatalf("closing GET /v2/ body: %v", err)
	}
	return response{Status: resp.Status, StatusCode: resp.StatusCode, Header: resp.Header}
}

func TestStartDefaults(t *testing.T) {
	reg := start(t, registry.Options{})

	host, port, err := net.SplitHostPort(reg.Host())
	if err != nil {
		t.Fatalf("Host() = %q: %v", reg.Host(), err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Errorf("Host() = %q, want 127.0.0.1 with a real port", reg.Host())
	}
	if reg.LocalHost() != reg.Host() {
		t.Errorf("LocalHost() = %q, want Host() %q", reg.LocalHost(), reg.Host())
	}
	if got, want := reg.Ref("kip-e2e/hello", "v1"), reg.Host()+"/kip-e2e/hello:v1"; got != want {
		t.Errorf("Ref() = %q, want %q", got, want)
	}
	if reg.AuthRequired() {
		t.Error("AuthRequired() = true for an anonymous registry")
	}
	if resp := get(t, reg.Host(), "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ = %s, want 200", resp.Status)
	}
}

func TestBasicAuth(t *testing.T) {
	var logs syncbuf.Buffer
	reg := start(t, registry.Options{Username: "kip", Password: "s3cret", Log: &logs})
	if !reg.AuthRequired() {
		t.Error("AuthRequired() = false with credentials set")
	}
	if u, p := reg.Credentials(); u != "kip" || p != "s3cret" {
		t.Errorf("Credentials() = %q, %q", u, p)
	}

	tests := []struct {
		name       string
		user, pass string
		want       int
	}{
		{name: "anonymous", want: http.StatusUnauthorized},
		{name: "wrong password", user: "kip", pass: "nope", want: http.StatusUnauthorized},
		{name: "wrong user", user: "pik", pass: "s3cret", want: http.StatusUnauthorized},
		{name: "right credentials", user: "kip", pass: "s3cret", want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := get(t, reg.Host(), tt.user, tt.pass)
			if resp.StatusCode != tt.want {
				t.Fatalf("GET /v2/ = %s, want %d", resp.Status, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
					t.Errorf("WWW-Authenticate = %q, want a Basic challenge", got)
				}
			}
		})
	}
	if !strings.Contains(logs.String(), "401") {
		t.Errorf("log has no 401 line:\n%s", logs.String())
	}
}

func TestAdvertiseHost(t *testing.T) {
	reg := start(t, registry.Options{Addr: "0.0.0.0:0", AdvertiseHost: "10.11.12.13"})

	_, port, err := net.SplitHostPort(reg.LocalHost())
	if err != nil {
		t.Fatal(err)
	}
	if want := "10.11.12.13:" + port; reg.Host() != want {
		t.Errorf("Host() = %q, want %q", reg.Host(), want)
	}
	if want := "127.0.0.1:" + port; reg.LocalHost() != want {
		t.Errorf("LocalHost() = %q, want %q", reg.LocalHost(), want)
	}
	if got, want := reg.Ref("a/b", "t"), "10.11.12.13:"+port+"/a/b:t"; got != want {
		t.Errorf("Ref() = %q, want %q", got, want)
	}
	if resp := get(t, reg.LocalHost(), "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ on LocalHost = %s, want 200", resp.Status)
	}
}

func TestStartBadAddr(t *testing.T) {
	reg := start(t, registry.Options{})
	// The port is taken by the first registry.
	if _, err := registry.Start(t.Context(), registry.Options{Addr: reg.LocalHost()}); err == nil {
		t.Fatal("Start on a busy address succeeded")
	}
}

func TestCloseAndContext(t *testing.T) {
	t.Run("Close twice", func(t *testing.T) {
		reg, err := registry.Start(t.Context(), registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := reg.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		waitRefused(t, reg.LocalHost())
	})
	t.Run("context done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		reg, err := registry.Start(ctx, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		waitRefused(t, reg.LocalHost())
		if err := reg.Close(); err != nil {
			t.Fatalf("Close after cancel: %v", err)
		}
	})
}

// waitRefused waits until nothing listens on host any more.
func waitRefused(t *testing.T, host string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections", host)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
