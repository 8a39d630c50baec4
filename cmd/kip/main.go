// Command kip is the Kip host: a Kubernetes virtual node whose pods each run
// on their own cloud instance, launched through a cloud plugin. See the
// README and `kip help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kipcell/kip/host/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.ProcessEnv())
	stop()
	os.Exit(code)
}
