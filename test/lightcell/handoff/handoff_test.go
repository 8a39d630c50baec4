package handoff

import (
	"errors"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// handOver hands args over on a socket of the test's own and returns
// both sides.
func handOver(t *testing.T, args []string) (*Conn, *Handed) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "h.sock")
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	conn, err := Hand(socket, args)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lis.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Accept(c)
	if err != nil {
		t.Fatal(err)
	}
	return conn, h
}

func TestHandCarriesArgsEnvAndDescriptors(t *testing.T) {
	t.Setenv("KIP_CELL_ADDRESS", "10.0.0.7")
	t.Setenv("OTHER_VARIABLE", "not handed")
	dir := t.TempDir()
	t.Chdir(dir)
	conn, h := handOver(t, []string{"--bootstrap", "b.json"})
	if !slices.Equal(h.Request.Args, []string{"--bootstrap", "b.json"}) || h.Request.Dir != dir {
		t.Errorf("request %+v, want the args and directory %s", h.Request, dir)
	}
	if got := h.Getenv("KIP_CELL_ADDRESS"); got != "10.0.0.7" {
		t.Errorf("KIP_CELL_ADDRESS = %q, want 10.0.0.7", got)
	}
	if got := h.Getenv("OTHER_VARIABLE"); got != "" {
		t.Errorf("OTHER_VARIABLE handed over: %q", got)
	}
	if h.Netns == nil || h.Stderr == nil {
		t.Fatal("descriptors missing")
	}
	h.Finish(nil)
	if code, err := conn.Wait(); code != 0 || err != nil {
		t.Errorf("Wait = %d, %v; want 0", code, err)
	}
}

func TestStopAndFailure(t *testing.T) {
	conn, h := handOver(t, nil)
	if err := conn.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the host never saw the stop")
	}
	h.Finish(errors.New("listening: address in use\nmore lines"))
	code, err := conn.Wait()
	if code != 1 || err == nil || err.Error() != "listening: address in use" {
		t.Errorf("Wait = %d, %v; want 1 and the error's first line", code, err)
	}
}

func TestHostGone(t *testing.T) {
	conn, h := handOver(t, nil)
	_ = h.c.Close()
	h.closeFiles()
	if code, err := conn.Wait(); code != 1 || err == nil {
		t.Errorf("Wait after the host went = %d, %v; want 1 and an error", code, err)
	}
}
