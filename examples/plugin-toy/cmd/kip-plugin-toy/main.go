// Command kip-plugin-toy is the toy cloud's Kip plugin; kip starts it as a
// subprocess.
package main

import (
	"github.com/kipcell/kip/pluginapi"

	"example.com/kip-plugin-toy/toy"
)

func main() { pluginapi.Serve(toy.New) }
