// Package handoff is how a per-cell process hands its cell to a process
// that hosts many light cells (test/lightcell, test/cmd/kip-light-cells),
// so that the local plugin, which runs an agent command per cell and
// supervises its process, can run a thousand light cells: each cell's
// process is a small stub (test/cmd/kip-light-stub) that stays for the
// cell's life, while the cell itself runs in the host process.
//
// Over a unix socket (a path, reachable from any network namespace) the
// stub sends one Request (its arguments: kip-cell's flags, its KIP_CELL_*
// environment, its directory) with two descriptors: its network
// namespace, where the host opens the cell's listener, and its stderr,
// where the cell's log goes. It then waits: on SIGTERM or SIGINT it
// writes "stop" and the host stops the cell as kip-cell stops on those
// signals; the host answers "exit N" when the cell has ended, and the
// stub exits N. A stub killed outright closes the socket, which stops the
// cell too; a host gone ends every stub (exit 1).
//
// The package imports only the standard library, so that the stub stays
// small: a thousand of them run at once.
package handoff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Request is what a stub hands over.
type Request struct {
	// Args are the stub's arguments: kip-cell's flags (cell.Flags).
	Args []string `json:"args"`
	// Env is the stub's environment that kip-cell reads its defaults
	// from (KIP_CELL_*), as NAME=value.
	Env []string `json:"env"`
	// Dir is the stub's working directory, against which relative paths
	// in Args are read.
	Dir string `json:"dir"`
}

// EnvPrefix marks the variables a stub hands over.
const EnvPrefix = "KIP_CELL_"

// Lines of the conversation after the Request.
const (
	stopLine = "stop"
	exitWord = "exit"
)

// maxRequest bounds a Request's encoding (kip-cell's flags and a few
// variables).
const maxRequest = 64 << 10

// Hand hands the cell of args and the process's environment to the host
// listening at socket, and returns a Conn to wait on.
func Hand(socket string, args []string) (*Conn, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("handing the cell over: %w", err)
	}
	req := Request{Args: args, Dir: dir}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, EnvPrefix) {
			req.Env = append(req.Env, kv)
		}
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("handing the cell over: %w", err)
	}
	netns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("handing the cell over: opening the network namespace: %w", err)
	}
	defer netns.Close()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("handing the cell over to %s: %w", socket, err)
	}
	rights := syscall.UnixRights(int(netns.Fd()), int(os.Stderr.Fd()))
	if _, _, err := c.WriteMsgUnix(append(data, '\n'), rights, nil); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("handing the cell over to %s: %w", socket, err)
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

// Conn is a stub's side of a cell handed over.
type Conn struct {
	c *net.UnixConn
	r *bufio.Reader
}

// Stop asks the host to stop the cell.
func (c *Conn) Stop() error {
	_, err := c.c.Write([]byte(stopLine + "\n"))
	return err
}

// Wait waits for the cell to end and returns its exit code, with the
// host's reason when it failed.
func (c *Conn) Wait() (int, error) {
	defer c.c.Close()
	line, err := c.r.ReadString('\n')
	if err != nil {
		return 1, fmt.Errorf("waiting for the cell: the host went away: %w", err)
	}
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	codeText, reason, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if word != exitWord || err != nil {
		return 1, fmt.Errorf("waiting for the cell: the host said %q", line)
	}
	if reason != "" {
		return code, errors.New(reason)
	}
	return code, nil
}

// Handed is a cell handed over, on the host's side.
type Handed struct {
	Request Request
	// Netns is the stub's network namespace, Stderr its stderr; the
	// host closes both with Finish.
	Netns, Stderr *os.File
	c             *net.UnixConn
	stopped       chan struct{}
}

// Accept reads the Request of a connection a stub made.
func Accept(c *net.UnixConn) (*Handed, error) {
	buf := make([]byte, maxRequest)
	oob := make([]byte, syscall.CmsgSpace(2*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("reading a handed cell: %w", err)
	}
	files, err := receivedFiles(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("reading a handed cell: %w", err)
	}
	if len(files) != 2 {
		for _, f := range files {
			_ = f.Close()
		}
		return nil, fmt.Errorf("reading a handed cell: %d descriptors, want 2 (network namespace, stderr)", len(files))
	}
	h := &Handed{Netns: files[0], Stderr: files[1], c: c, stopped: make(chan struct{})}
	// The Request is one line, which a stream may deliver in pieces; a
	// stop may follow it at once.
	data := buf[:n]
	for !bytes.Contains(data, []byte("\n")) && len(data) < maxRequest {
		m, err := c.Read(buf[len(data):])
		if err != nil {
			h.closeFiles()
			return nil, fmt.Errorf("reading a handed cell: %w", err)
		}
		data = buf[:len(data)+m]
	}
	line, rest, _ := bytes.Cut(data, []byte("\n"))
	if err := json.Unmarshal(line, &h.Request); err != nil {
		h.closeFiles()
		return nil, fmt.Errorf("reading a handed cell: %w", err)
	}
	if len(rest) > 0 {
		close(h.stopped) // the stub asked to stop already
	} else {
		go h.watch()
	}
	return h, nil
}

// receivedFiles are the descriptors of a control message.
func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "handed-"+strconv.Itoa(fd)))
		}
	}
	return files, nil
}

// watch closes stopped when the stub asks to stop or goes away.
func (h *Handed) watch() {
	defer close(h.stopped)
	_, _ = bufio.NewReader(h.c).ReadString('\n')
}

// Stopped is closed when the stub asks the cell to stop, or is gone.
func (h *Handed) Stopped() <-chan struct{} { return h.stopped }

// Getenv reads the Request's environment.
func (h *Handed) Getenv(name string) string {
	for _, kv := range h.Request.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// Finish tells the stub the cell ended (err nil: exit 0, else exit 1
// with err's first line) and closes the connection and descriptors.
func (h *Handed) Finish(err error) {
	line := exitWord + " 0\n"
	if err != nil {
		reason, _, _ := strings.Cut(err.Error(), "\n")
		line = exitWord + " 1 " + reason + "\n"
	}
	_, _ = h.c.Write([]byte(line))
	_ = h.c.Close()
	h.closeFiles()
}

func (h *Handed) closeFiles() {
	_ = h.Netns.Close()
	_ = h.Stderr.Close()
}
