// Command kip-plugin-gce is Kip's Google Compute Engine cloud plugin:
// every cell is a Compute Engine instance. kip starts it as a subprocess;
// see deploy/gce/README.md.
package main

import (
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/gce"
)

func main() { pluginapi.Serve(gce.New) }
