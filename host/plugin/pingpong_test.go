package plugin

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/test/bench"
)

// echoEnv, set to "network address" (e.g. "unix /tmp/x.sock"), makes the
// test binary an echo process (TestMain): it dials the address and writes
// back every message it reads, until the connection closes.
const echoEnv = "KIP_BENCH_ECHO"

// pingSize is the size of one ping: about a small gRPC request's frames
// (HEADERS and DATA) on the wire.
const pingSize = 128

// BenchmarkPingPong is the floor under BenchmarkRoundTrip without gRPC:
// one message to another process and its echo back, over a Unix socket
// (what go-plugin uses on Linux) and over TCP loopback, one goroutine on
// each side. It reports the p50/p90/p99 latency.
func BenchmarkPingPong(b *testing.B) {
	for _, network := range []string{"unix", "tcp"} {
		b.Run(network, func(b *testing.B) {
			conn := echoPeer(b, network)
			buf := make([]byte, pingSize)
			durs := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			bench.Report(b, "", time.Microsecond, durs)
		})
	}
}

// echoPeer starts this test binary as an echo process connected to a
// listener on network and returns the connection to it.
func echoPeer(b *testing.B, network string) net.Conn {
	b.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(b.TempDir(), "echo.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	// An echo process that never dials fails the benchmark, not hangs it.
	if err := ln.(interface{ SetDeadline(time.Time) error }).SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), echoEnv+"="+network+" "+ln.Addr().String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		_ = cmd.Process.Kill()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = conn.Close()
		_ = cmd.Wait()
	})
	return conn
}

// echo is the echo process's whole work (see echoEnv); it returns the
// process's exit status.
func echo(spec string) int {
	network, addr, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(os.Stderr, "%s=%q: want \"network address\"\n", echoEnv, spec)
		return 2
	}
	conn, err := net.Dial(network, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		return 1
	}
	defer conn.Close()
	buf := make([]byte, pingSize)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0
		}
		if _, err := conn.Write(buf); err != nil {
			return 0
		}
	}
}
