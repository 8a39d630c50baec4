// Command fakeplugin is the cloud plugin the host/daemon tests run kip
// with: pluginapi's in-memory fake provider, served as a real plugin.
package main

import (
	"log/slog"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

func main() {
	pluginapi.Serve(func(*slog.Logger) pluginapi.Provider { return fake.New() })
}
