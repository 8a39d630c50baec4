package cell

import (
	"fmt"
	"os"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/pluginapi/userdata"
)

// ReadBootstrap reads the bootstrap file: the bootstrap JSON itself (the
// local plugin writes one), or a cloud instance's user data as the boot
// recipe saved it, whose bootstrap part pluginapi/userdata reads.
func ReadBootstrap(path string) (*api.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading bootstrap: %w", err)
	}
	part, err := userdata.Bootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("reading bootstrap from the user data in %s: %w", path, err)
	}
	return api.ParseBootstrap(part)
}
