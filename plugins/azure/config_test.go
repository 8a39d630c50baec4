package azure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/ratelimit"
)

// validConfig is a valid configuration that needs no endpoint.
func validConfig() map[string]any {
	return map[string]any{
		"subscriptionID": fakeSub,
		"resourceGroup":  fakeRG,
		"location":       fakeLocation,
		"subnetID":       fakeSubnetID,
		"image":          map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server"},
	}
}

// Every configuration error names its key.
func TestConfigErrorsNameTheirKey(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	secret := filepath.Join(dir, "secret")
	notPEM := filepath.Join(dir, "not.pem")
	for _, file := range []struct{ path, data string }{{empty, ""}, {secret, "s3cret\n"}, {notPEM, "hello"}} {
		if err := os.WriteFile(file.path, []byte(file.data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 50<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	guid := "11111111-2222-3333-4444-555555555555"
	for _, tc := range []struct {
		key   string
		value any
		want  string // the key the error names
	}{
		{"subscriptionID", nil, "subscriptionID"},
		{"subscriptionID", "my-sub", "subscriptionID"},
		{"subscriptionID", 7, "subscriptionID"},
		{"resourceGroup", "", "resourceGroup"},
		{"resourceGroup", "ends.", "resourceGroup"},
		{"location", "East US", "location"},
		{"location", nil, "location"},
		{"zones", []string{"1", "1"}, "zones[1]"},
		{"zones", []string{"eastus-1"}, "zones[0]"},
		{"subnetID", "/subscriptions/x/resourceGroups/y/providers/Microsoft.Network/virtualNetworks/v", "subnetID"},
		{"networkSecurityGroupID", "nsg-1", "networkSecurityGroupID"},
		{"image", nil, "image"},
		{"image", map[string]any{"id": "/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/images/i", "sku": "s"}, "image"},
		{"image", map[string]any{"id": "my-image"}, "image.id"},
		{"image", map[string]any{"publisher": "Canonical", "offer": "o"}, "image.sku"},
		{"image", map[string]any{"publisher": "Canonical", "offer": "o", "sku": "s", "version": "a b"}, "image.version"},
		{"image", map[string]any{"name": "x"}, "image.name"},
		{"identity", "/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachines/v", "identity"},
		{"tags", map[string]string{"a/b": "c"}, "tags.a/b"},
		{"tags", map[string]string{"KIP-CELL": "c"}, "tags.KIP-CELL"},
		{"tags", map[string]string{"a": strings.Repeat("v", 257)}, "tags.a"},
		{"credentials", map[string]any{"tenantID": guid, "clientID": guid}, "credentials"},
		{"credentials", map[string]any{"tenantID": "t", "clientID": guid, "clientSecretFile": secret}, "credentials.tenantID"},
		{"credentials", map[string]any{"tenantID": guid, "clientID": "c", "clientSecretFile": secret}, "credentials.clientID"},
		{"credentials", map[string]any{"tenantID": guid, "clientID": guid, "clientSecretFile": filepath.Join(dir, "none")}, "credentials.clientSecretFile"},
		{"credentials", map[string]any{"tenantID": guid, "clientID": guid, "clientCertificateFile": filepath.Join(dir, "none")}, "credentials.clientCertificateFile"},
		{"credentials", map[string]any{"tenantID": guid, "clientID": guid, "password": "x"}, "credentials.password"},
		{"endpoint", "http://arm.local", "endpoint"},
		{"caBundle", notPEM, "caBundle"},
		{"withoutAuthentication", true, "withoutAuthentication"},
		{"rateLimit", map[string]any{"readPerSecond": -1}, "rateLimit.readPerSecond"},
		{"rateLimit", map[string]any{"mutatePerSecond": -2}, "rateLimit.mutatePerSecond"},
		{"rateLimit", map[string]any{"burst": -1}, "rateLimit.burst"},
		{"customData", empty, "customData"},
		{"customData", big, "customData"},
		{"customData", filepath.Join(dir, "none"), "customData"},
		{"adminUsername", "root", "adminUsername"},
		{"adminUsername", "Has Space", "adminUsername"},
		{"sshPublicKey", "not a key", "sshPublicKey"},
		{"region", "eastus", "region"},
	} {
		cfg := with(validConfig(), tc.key, tc.value)
		c, err := decodeConfig(mustJSON(t, cfg))
		if err == nil {
			_, err = validate(c)
		}
		var ic *pluginapi.InvalidConfigError
		if !errors.As(err, &ic) || ic.Key != tc.want {
			t.Errorf("%s = %v: %v; want InvalidConfig naming %s", tc.key, tc.value, err, tc.want)
		}
	}
	// credentials and withoutAuthentication together: both name it.
	cfg := validConfig()
	cfg["endpoint"], cfg["withoutAuthentication"] = "https://arm.local", true
	cfg["credentials"] = map[string]any{"tenantID": guid, "clientID": guid, "clientSecretFile": secret}
	c, err := decodeConfig(mustJSON(t, cfg))
	if err == nil {
		_, err = validate(c)
	}
	if !pluginapi.IsInvalidConfig(err) || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("credentials with withoutAuthentication: %v", err)
	}
}

// Defaults: zones 1 to 3, version latest, the administrator, the rate
// limits; an image ID is taken as it is.
func TestConfigDefaults(t *testing.T) {
	c, err := decodeConfig(mustJSON(t, validConfig()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := validate(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.zones, ",") != "1,2,3" || s.image.Version != "latest" || s.adminUsername != "kipadmin" ||
		s.rate != (ratelimit.Config{ReadPerSecond: 10, MutatePerSecond: 5, Burst: 20}) || s.endpoint != "" || s.sshPublicKey != "" {
		t.Errorf("defaults: %+v", s)
	}
	id := "/subscriptions/" + fakeSub + "/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/kip-cell/versions/1.0.0"
	c, _ = decodeConfig(mustJSON(t, with(validConfig(), "image", map[string]any{"id": id})))
	if s, err = validate(c); err != nil || s.image.ID != id {
		t.Errorf("image id: %+v, %v", s, err)
	}
}

// Configure checks the subnet and the network security group with Azure
// and names subnetID or networkSecurityGroupID when it is missing; an
// empty ClusterID names clusterID; without sshPublicKey the
// cells get a generated RSA key.
func TestConfigure(t *testing.T) {
	f := newFakeARM(t)
	p := newProvider(f)
	var ic *pluginapi.InvalidConfigError
	_, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, Config: mustJSON(t, with(testConfig(f), "subnetID", fakeSubnetID+"x"))})
	if !errors.As(err, &ic) || ic.Key != "subnetID" {
		t.Errorf("a missing subnet: %v; want InvalidConfig naming subnetID", err)
	}
	_, err = p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: testCluster, Config: mustJSON(t, with(testConfig(f), "networkSecurityGroupID", fakeNSGID+"x"))})
	if !errors.As(err, &ic) || ic.Key != "networkSecurityGroupID" {
		t.Errorf("a missing network security group: %v; want InvalidConfig naming networkSecurityGroupID", err)
	}
	if _, err = p.Configure(t.Context(), &pluginapi.ConfigureRequest{Config: mustJSON(t, testConfig(f))}); !errors.As(err, &ic) || ic.Key != "clusterID" {
		t.Errorf("no cluster ID: %v; want InvalidConfig naming clusterID", err)
	}
	p = configured(t, f, with(testConfig(f), "sshPublicKey", nil))
	cfg, _ := p.cfg.Get()
	if !sshKeyRE.MatchString(cfg.sshPublicKey) || !strings.HasPrefix(cfg.sshPublicKey, "ssh-rsa ") {
		t.Errorf("the generated key %q is not an ssh-rsa authorized_keys line", cfg.sshPublicKey)
	}
	if h := f.header("Subnets_Get", 0); h.Get("Authorization") != "Bearer kip-without-authentication" {
		t.Errorf("the subnet check was sent with Authorization %q", h.Get("Authorization"))
	}
}
