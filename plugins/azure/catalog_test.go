package azure

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// ListInstanceTypes offers every catalog size in every configured zone with
// unknown prices, available where resourceSkus says the subscription may
// have it; the list is asked once.
func TestListInstanceTypes(t *testing.T) {
	f := newFakeARM(t)
	cfg := testConfig(f)
	cfg["zones"] = []string{"1", "3"}
	p := configured(t, f, cfg)
	for range 2 {
		resp, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		avail := map[string][]string{}
		for _, it := range resp.InstanceTypes {
			for _, o := range it.Offerings {
				if o.PriceKnown {
					t.Fatalf("%s in %s has a price; the catalog has none", it.Name, o.Zone)
				}
				if o.Available && o.CapacityType == pluginapi.CapacityOnDemand {
					avail[it.Name] = append(avail[it.Name], o.Zone)
				}
			}
		}
		want := map[string][]string{
			"Standard_B2s":    {"eastus-1", "eastus-3"},
			"Standard_D2s_v3": {"eastus-1", "eastus-3"},
			"Standard_D4s_v3": {"eastus-1"}, // zone 3 restricted
		}
		if diff := cmp.Diff(want, avail); diff != "" {
			t.Errorf("available offerings (-want +got):\n%s", diff)
		}
	}
	if got := f.callCount("ResourceSkus_List"); got != 1 {
		t.Errorf("resourceSkus listed %d times; want once (cached)", got)
	}
	if q := f.header("ResourceSkus_List", 0); q == nil {
		t.Fatal("no request recorded")
	}
}

// Without permission for resourceSkus, every offering is available.
func TestListInstanceTypesWithoutPermission(t *testing.T) {
	f := newFakeARM(t)
	p := configured(t, f, testConfig(f))
	f.fail("ResourceSkus_List", 403, "AuthorizationFailed", "The client does not have authorization to perform action 'Microsoft.Compute/skus/read'.", 1)
	resp, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range resp.InstanceTypes {
		for _, o := range it.Offerings {
			if !o.Available {
				t.Fatalf("%s in %s is unavailable; want every offering available", it.Name, o.Zone)
			}
		}
	}
}

// GetInfo says the catalog has no prices, so kip plugins describe (which
// prints the catalog's source) tells the operator.
func TestGetInfoSaysPricesAreUnknown(t *testing.T) {
	info, err := New(nil).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Catalog.Source, "prices: none") || !strings.Contains(info.Catalog.Source, "unknown") {
		t.Errorf("the catalog's source %q does not say prices are unknown", info.Catalog.Source)
	}
	if info.Name != Name || info.Catalog.GeneratedAt.IsZero() {
		t.Errorf("GetInfo = %+v", info)
	}
}

// The JSON Schema GetInfo reports, rendered from Config, is the golden
// file (go test -update rewrites it, and its diff shows what a change of
// Config's keys or tags does to the schema), and its required keys are the
// ones validate requires.
func TestConfigSchema(t *testing.T) {
	info, err := New(slog.New(slog.DiscardHandler)).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "config-schema.json", []byte(info.ConfigSchema))
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(info.ConfigSchema), &schema); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"image", "location", "resourceGroup", "subnetID", "subscriptionID"}, slices.Sorted(slices.Values(schema.Required))); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	for _, k := range schema.Required {
		raw := maps.Clone(validConfig())
		delete(raw, k)
		c, err := decodeConfig(mustJSON(t, raw))
		if err == nil {
			_, err = validate(c)
		}
		if !pluginapi.IsInvalidConfig(err) || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v; want InvalidConfig naming it", k, err)
		}
	}
}
