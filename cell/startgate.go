package cell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// EnvStartGate names the environment variable through which a
// supervisor that starts agents itself (the local plugin: a cloud
// instance's systemd needs none) passes the agent an inherited file
// descriptor, the read end of a pipe. The supervisor writes a byte once
// it has recorded the agent's process, so that it will stop it and never
// start a second agent of the cell beside it; if the supervisor dies
// before that, the pipe ends without the byte and the agent exits before
// it touches the cell. Without the gate, an agent whose supervisor was
// killed between starting and recording it ran on unrecorded: the next
// supervisor started another agent of the same cell, the two tore down
// each other's pod network, and the recorded one, unable to listen on the
// port the other held, exited until the cell was given up.
const EnvStartGate = "KIP_CELL_START_GATE"

// AwaitStartGate waits at the start gate that getenv(EnvStartGate) names,
// if any, and closes it: it reports whether the agent may go on (no gate,
// or the supervisor opened it) or must exit (the supervisor died first).
func AwaitStartGate(getenv func(string) string) (bool, error) {
	v := getenv(EnvStartGate)
	if v == "" {
		return true, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return false, fmt.Errorf("waiting at the start gate: $%s=%q is not an inherited file descriptor", EnvStartGate, v)
	}
	f := os.NewFile(uintptr(fd), "start-gate")
	if f == nil {
		return false, fmt.Errorf("waiting at the start gate: $%s=%q is not an open file descriptor", EnvStartGate, v)
	}
	defer f.Close()
	var b [1]byte
	n, err := f.Read(b[:])
	switch {
	case n == 1:
		return true, nil
	case err == nil || errors.Is(err, io.EOF):
		return false, nil
	default:
		return false, fmt.Errorf("waiting at the start gate: %w", err)
	}
}
