// Command kip-light-stub is a light cell's process when many light cells
// run in one kip-light-cells process: it hands its cell (its arguments,
// kip-cell's flags, its KIP_CELL_* environment, its network namespace and
// its stderr) to the kip-light-cells listening at SOCKET
// (test/lightcell/handoff), stays while the cell runs, stops it on
// SIGTERM or SIGINT, and exits with the cell's exit code. It links only
// the standard library and handoff, so that a thousand of them cost
// little; give it to the local plugin as its agentCommand:
//
//	kip-light-stub SOCKET --bootstrap {bootstrap} [kip-cell flags]
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kipcell/kip/test/lightcell/handoff"
)

// handWithin is how long the stub tries to reach kip-light-cells.
const handWithin = 10 * time.Second

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kip-light-stub SOCKET [kip-cell flags]")
		os.Exit(2)
	}
	code, err := run(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-light-stub:", err)
	}
	os.Exit(code)
}

func run(socket string, args []string) (int, error) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	var (
		conn *handoff.Conn
		err  error
	)
	for deadline := time.Now().Add(handWithin); ; time.Sleep(100 * time.Millisecond) {
		conn, err = handoff.Hand(socket, args)
		if !notListening(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return 1, err
	}
	go func() {
		<-signals
		_ = conn.Stop()
	}()
	return conn.Wait()
}

// notListening: nothing listens at the socket yet (kip-light-cells is
// starting).
func notListening(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}
