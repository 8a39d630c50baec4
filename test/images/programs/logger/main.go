// Command logger is Kip's log test workload: it prints -n numbered lines
// ("<RFC 3339 time> line <i>", i from 1) to stdout, one every -interval,
// then sleeps until SIGTERM or SIGINT and exits 0. With -n 0 it prints
// forever.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 10, "number of lines to print; 0 prints forever")
	interval := flag.Duration("interval", 100*time.Millisecond, "time between lines")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	t := time.NewTicker(*interval)
	defer t.Stop()
	for i := 1; *n == 0 || i <= *n; i++ {
		fmt.Printf("%s line %d\n", time.Now().UTC().Format(time.RFC3339Nano), i)
		if *n != 0 && i == *n {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	<-ctx.Done()
}
