package aws

import (
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func TestRegistryAuth(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	image := fakeOwner + ".dkr.ecr.eu-west-1.amazonaws.com/team/app:1.2"
	resp, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image})
	if err != nil {
		t.Fatal(err)
	}
	want := pluginapi.RegistryAuthResponse{Server: fakeOwner + ".dkr.ecr.eu-west-1.amazonaws.com", Username: "AWS",
		Password: "password-1", ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	if !resp.ExpiresAt.Equal(want.ExpiresAt) || resp.Server != want.Server || resp.Username != want.Username || resp.Password != want.Password {
		t.Errorf("RegistryAuth = %+v, want %+v", *resp, want)
	}
	// Cached until shortly before it expires.
	if again, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image + "-other"}); err != nil || again.Password != "password-1" {
		t.Errorf("second RegistryAuth = %+v, %v; want the cached token", again, err)
	}
	if n := f.callCount("GetAuthorizationToken"); n != 1 {
		t.Errorf("%d GetAuthorizationToken calls, want 1", n)
	}
	clock := newFakeClock()
	clock.now = time.Date(2029, 12, 31, 23, 45, 0, 0, time.UTC)
	p.cfg.Load().registry.now = clock.Now
	if again, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: image}); err != nil || again.Password != "password-2" {
		t.Errorf("RegistryAuth near expiry = %+v, %v; want a new token", again, err)
	}

	for _, other := range []string{"nginx", "library/nginx:1", "docker.io/library/nginx", "ghcr.io/kipcell/kip", "localhost:5000/app",
		"123.dkr.ecr.us-east-1.amazonaws.com/app", fakeOwner + ".dkr.ecr.us-east-1.amazonaws.com.evil.com/app"} {
		if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: other}); !pluginapi.IsNotFound(err) {
			t.Errorf("RegistryAuth(%s) = %v, want NotFound", other, err)
		}
	}
	for _, ecr := range []string{fakeOwner + ".dkr.ecr-fips.us-gov-west-1.amazonaws.com/app", fakeOwner + ".dkr.ecr.cn-north-1.amazonaws.com.cn/app@sha256:00"} {
		if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: ecr}); err != nil {
			t.Errorf("RegistryAuth(%s) = %v", ecr, err)
		}
	}
}

func TestRegistryAuthErrors(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	f.fail("GetAuthorizationToken", "ThrottlingException", 400, 1)
	image := fakeOwner + ".dkr.ecr.us-east-1.amazonaws.com/app"
	if _, err := p.RegistryAuth(t.Context(), &pluginapi.RegistryAuthRequest{Image: image}); !pluginapi.IsThrottled(err) {
		t.Errorf("RegistryAuth while throttled = %v, want Throttled", err)
	}
}
