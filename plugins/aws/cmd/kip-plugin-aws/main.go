// Command kip-plugin-aws is Kip's Amazon EC2 cloud plugin: every cell is an
// EC2 instance. kip starts it as a subprocess; see deploy/aws/README.md.
package main

import (
	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/aws"
)

func main() { pluginapi.Serve(aws.New) }
