package toy_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

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
