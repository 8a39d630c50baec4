package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/kipcell/kip/host/setting"
)

// DefaultName is the plugin kip runs unless kip.yaml names another.
const DefaultName = "local"

// nameRE is a plugin name: the <name> of kip-plugin-<name>.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// DefaultConfig is the plugin section of kip.yaml before any setting: the
// local plugin from the plugin directory, unpinned, without settings.
func DefaultConfig() Config { return Config{Name: DefaultName} }

// Validate checks the plugin section of kip.yaml, naming each bad key in a
// *setting.Error. Settings are the plugin's to validate (Configure).
func (c Config) Validate() error {
	var errs []error
	if !nameRE.MatchString(c.Name) {
		errs = append(errs, setting.Errorf("name", "%q is not a plugin name (lower-case letters, digits, - and _)", c.Name))
	}
	if _, err := parsePin(c.SHA256); err != nil {
		errs = append(errs, setting.Errorf("sha256", "want 64 hexadecimal digits"))
	}
	return errors.Join(errs...)
}

// SettingsJSON returns Settings as the JSON object the plugin's Configure
// receives ("{}" when there are none).
func (c Config) SettingsJSON() ([]byte, error) {
	if c.Settings == nil {
		return []byte("{}"), nil
	}
	data, err := json.Marshal(c.Settings)
	if err != nil {
		return nil, fmt.Errorf("encoding plugin.config as JSON: %w", err)
	}
	return data, nil
}
