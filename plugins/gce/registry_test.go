package gce

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/auth"

	"github.com/kipcell/kip/pluginapi"
)

type fakeToken struct{}

func (fakeToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: "ya29.token", Expiry: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}, nil
}

// RegistryAuth answers Artifact Registry and Container Registry images
// with the credentials' token; other registries are NotFound; without
// credentials it says which key.
func TestRegistryAuth(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	_, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: "us-docker.pkg.dev/p/r/app:1"})
	var ic *pluginapi.InvalidConfigError
	if !errors.As(err, &ic) || ic.Key != "withoutAuthentication" {
		t.Errorf("RegistryAuth without credentials = %v", err)
	}
	p.cfg.Load().creds = auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: fakeToken{}})
	for _, image := range []string{"us-docker.pkg.dev/p/r/app:1", "europe-west1-docker.pkg.dev/p/r/app", "gcr.io/p/app", "eu.gcr.io/p/app"} {
		resp, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image})
		if err != nil || resp.Username != registryUser || resp.Password != "ya29.token" || resp.ExpiresAt.IsZero() || resp.Server != registryHost(image) {
			t.Errorf("RegistryAuth(%s) = %+v, %v", image, resp, err)
		}
	}
	for _, image := range []string{"nginx", "docker.io/library/nginx", "123456789012.dkr.ecr.us-east-1.amazonaws.com/app", "pkg.dev.example.com/app"} {
		if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image}); !pluginapi.IsNotFound(err) {
			t.Errorf("RegistryAuth(%s) = %v, want NotFound", image, err)
		}
	}
}

// ConsoleOutput reads serial port 1; an unknown instance is NotFound.
func TestConsoleOutput(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	resp, err := p.Launch(ctx, launchRequest("kip-console"))
	if err != nil {
		t.Fatal(err)
	}
	f.set(resp.Instance.ID, func(in *fakeInstance) { in.console = "booting\nkip-cell: ready\n" })
	out, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: resp.Instance.ID})
	if err != nil || out.Output != "booting\nkip-cell: ready\n" || out.Timestamp.IsZero() {
		t.Errorf("ConsoleOutput = %+v, %v", out, err)
	}
	if q := f.query("instances.getSerialPortOutput", 0); q != "port=1" {
		t.Errorf("serial port query %q, want port=1", q)
	}
	for _, id := range []string{"us-central1-a/kip-none", "malformed"} {
		if _, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: id}); !pluginapi.IsNotFound(err) {
			t.Errorf("ConsoleOutput(%s) = %v, want NotFound", id, err)
		}
	}
}
