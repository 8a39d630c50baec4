package toy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/pluginapi/userdata"

	"example.com/kip-plugin-toy/toy"
)

// TestConformance runs Kip's conformance suite against the toy plugin, over
// real gRPC. Every provider the factory returns is configured with the same
// directory, so they see one cloud, as the plugin's processes would.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	plugintest.Run(t, toy.New, plugintest.Config{
		Plugin: []byte(`{"dir": "` + dir + `", "bootSeconds": 1}`),
		Invalid: []plugintest.InvalidConfig{
			{Config: []byte(`{}`), Key: "dir"},
			{Config: []byte(`{"dir": "toy-cloud"}`), Key: "dir"},
			{Config: []byte(`{"dir": "` + dir + `", "bootSeconds": -1}`), Key: "bootSeconds"},
			{Config: []byte(`{"dir": "` + dir + `", "bootSecond": 1}`), Key: "bootSecond"},
		},
		UnknownInstanceID: "toy-00000000deadbeef",
		// The volume cases' disks: instances run in toy-1a, so a disk in
		// toy-1b is in another zone.
		CreateVolume: func(ctx context.Context, zone string) (string, error) { return toy.CreateDisk(ctx, dir, zone) },
		DeleteVolume: func(ctx context.Context, handle string) error { return toy.DeleteDisk(ctx, dir, handle) },
		OtherZone:    "toy-1b",
		// The toy's disks have no type: every instance takes every disk.
		NoIncompatibleVolume: "the toy's disks have no type",
	})
}

// A launched instance carries the cell's bootstrap in its user data, where
// kip-cell --bootstrap on a real instance would read it.
func TestLaunchKeepsTheBootstrapInTheUserData(t *testing.T) {
	dir := t.TempDir()
	c := plugintest.Client(t, toy.New(slog.New(slog.DiscardHandler)))
	ctx := t.Context()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "c1", Config: []byte(`{"dir": "` + dir + `"}`)}); err != nil {
		t.Fatal(err)
	}
	bootstrap := []byte(`{"version":1,"cellID":"cell-1"}`)
	resp, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "cell-1", PodUID: "uid-1", InstanceType: "toy.small", Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, resp.Instance.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ UserData []byte }
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	got, err := userdata.Bootstrap(file.UserData)
	if err != nil || !bytes.Equal(got, bootstrap) {
		t.Errorf("the user data of instance %s holds bootstrap %q (%v), want %q", resp.Instance.ID, got, err, bootstrap)
	}
}

// The JSON Schema GetInfo reports, rendered from Config, is the golden
// file: go test -update rewrites it, and its diff shows what a change of
// Config's keys or tags does to the schema.
func TestConfigSchema(t *testing.T) {
	info, err := toy.New(slog.New(slog.DiscardHandler)).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-schema.json", []byte(info.ConfigSchema))
}

// The disk rules the conformance suite does not reach: an instance takes
// at most four disks, a disk attached somewhere cannot be deleted, and
// terminating an instance detaches its disks at once.
func TestDisks(t *testing.T) {
	dir := t.TempDir()
	c := plugintest.Client(t, toy.New(slog.New(slog.DiscardHandler)))
	ctx := t.Context()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "c1", Config: []byte(`{"dir": "` + dir + `"}`)}); err != nil {
		t.Fatal(err)
	}
	launched, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "cell-1", PodUID: "uid-1", InstanceType: "toy.small"})
	if err != nil {
		t.Fatal(err)
	}
	inst := launched.Instance.ID
	var disks []string
	for range 5 {
		h, err := toy.CreateDisk(ctx, dir, "toy-1a")
		if err != nil {
			t.Fatal(err)
		}
		disks = append(disks, h)
	}
	attach := func(h string) error {
		_, err := c.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: inst, Driver: toy.VolumeDriver, VolumeHandle: h})
		return err
	}
	for _, h := range disks[:4] {
		if err := attach(h); err != nil {
			t.Fatalf("attaching disk %s: %v", h, err)
		}
	}
	var conflict *pluginapi.VolumeConflictError
	if err := attach(disks[4]); !errors.As(err, &conflict) || conflict.Reason != pluginapi.ConflictAttachmentLimit {
		t.Errorf("attaching a fifth disk = %v, want VolumeConflict %s", err, pluginapi.ConflictAttachmentLimit)
	}
	if err := toy.DeleteDisk(ctx, dir, disks[0]); !errors.As(err, &conflict) || conflict.Reason != pluginapi.ConflictInUse {
		t.Errorf("deleting an attached disk = %v, want VolumeConflict %s", err, pluginapi.ConflictInUse)
	}

	if _, err := c.Terminate(ctx, &pluginapi.TerminateRequest{ID: inst}); err != nil {
		t.Fatal(err)
	}
	for _, h := range disks {
		if err := toy.DeleteDisk(ctx, dir, h); err != nil {
			t.Errorf("deleting disk %s of a terminated instance: %v", h, err)
		}
	}
	if err := toy.DeleteDisk(ctx, dir, disks[0]); !pluginapi.IsNotFound(err) {
		t.Errorf("deleting a deleted disk = %v, want NotFound", err)
	}
}

// A disk attaches to a running instance only, and not while it is still
// detaching from it: both answer Transient, which the host retries.
func TestAttachIsTransientWhilePendingOrDetaching(t *testing.T) {
	dir := t.TempDir()
	c := plugintest.Client(t, toy.New(slog.New(slog.DiscardHandler)))
	ctx := t.Context()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "c1", Config: []byte(`{"dir": "` + dir + `", "bootSeconds": 1}`)}); err != nil {
		t.Fatal(err)
	}
	launched, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "cell-1", PodUID: "uid-1", InstanceType: "toy.small"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := toy.CreateDisk(ctx, dir, "toy-1a")
	if err != nil {
		t.Fatal(err)
	}
	req := &pluginapi.AttachVolumeRequest{InstanceID: launched.Instance.ID, Driver: toy.VolumeDriver, VolumeHandle: h}
	if _, err := c.AttachVolume(ctx, req); !pluginapi.IsTransient(err) {
		t.Errorf("attaching to a pending instance = %v, want Transient", err)
	}
	time.Sleep(time.Second) // bootSeconds: the instance runs
	if _, err := c.AttachVolume(ctx, req); err != nil {
		t.Fatalf("attaching to the running instance: %v", err)
	}
	if _, err := c.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: req.InstanceID, Driver: req.Driver, VolumeHandle: h}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachVolume(ctx, req); !pluginapi.IsTransient(err) {
		t.Errorf("attaching a disk detaching from the same instance = %v, want Transient", err)
	}
}
