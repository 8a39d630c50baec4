// Command kip-plugin-local is Kip's local cloud plugin: cells are agent
// processes on this machine. kip starts it as a subprocess; see
// plugins/local/README.md.
package main

import (
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/local"
)

func main() { pluginapi.Serve(local.New) }
