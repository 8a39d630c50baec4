// Command kip-plugin-azure is Kip's Azure cloud plugin (pre-alpha): every
// cell is an Azure VM. kip starts it as a subprocess; see
// deploy/azure/README.md.
package main

import (
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/azure"
)

func main() { pluginapi.Serve(azure.New) }
