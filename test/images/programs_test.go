package images_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/kipcell/kip/test/images"
)

var (
	programsOnce sync.Once
	programsDir  string
	programsErr  error
)

// program returns the path of the named test program built for this
// machine, building all of them once.
func program(t *testing.T, name string) string {
	t.Helper()
	programsOnce.Do(func() {
		programsDir, programsErr = os.MkdirTemp("", "kip-programs-") //nolint:usetesting // shared by every test, removed by TestMain
		if programsErr != nil {
			return
		}
		args := []string{"build", "-o", programsDir + "/"}
		for _, p := range images.Programs {
			args = append(args, images.ProgramsPkg+"/"+p)
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			programsErr = errors.New(string(out))
		}
	})
	if programsErr != nil {
		t.Fatalf("building the test programs: %v", programsErr)
	}
	return filepath.Join(programsDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if programsDir != "" {
		os.RemoveAll(programsDir)
	}
	os.Exit(code)
}

func TestCrash(t *testing.T) {
	tests := []struct {
		name      string
		env       string // EXIT_CODE, unset when empty
		wantCode  int
		wantError string // in stderr
	}{
		{name: "default", wantCode: 1},
		{name: "zero", env: "0", wantCode: 0},
		{name: "seven", env: "7", wantCode: 7},
		{name: "unparsable", env: "seven", wantCode: 1, wantError: `crash: bad EXIT_CODE "seven"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), program(t, "crash"))
			cmd.Env = []string{}
			if tt.env != "" {
				cmd.Env = []string{"EXIT_CODE=" + tt.env}
			}
			stdout, stderr, code := run(t, cmd)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if stdout != "crash: stdout\n" {
				t.Errorf("stdout = %q", stdout)
			}
			if !strings.HasSuffix(stderr, "crash: stderr\n") || !strings.Contains(stderr, tt.wantError) {
				t.Errorf("stderr = %q, want %q and crash: stderr", stderr, tt.wantError)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), program(t, "logger"), "-n", "3", "-interval", "1ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+Z line (\d+)$`)
	sc := bufio.NewScanner(stdout)
	for i := 1; i <= 3; i++ {
		if !sc.Scan() {
			t.Fatalf("output ended before line %d: %v", i, sc.Err())
		}
		m := line.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != string(rune('0'+i)) {
			t.Errorf("line %d = %q", i, sc.Text())
		}
	}
	// It then sleeps: no fourth line, no exit.
	exited := make(chan error, 1)
	go func() {
		rest, _ := io.ReadAll(stdout)
		if len(rest) > 0 {
			t.Errorf("output after the last line: %q", rest)
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		t.Fatalf("logger exited before SIGTERM: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("logger after SIGTERM: %v, want exit 0", err)
	}
}

func TestHello(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	cmd := exec.CommandContext(t.Context(), program(t, "hello"), "-listen", addr, "-interval", "50ms")
	cmd.Env = []string{"MESSAGE=from the test"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	want := "hello from " + host + ": from the test"

	sc := bufio.NewScanner(stdout)
	for i := 0; i < 2; i++ {
		if !sc.Scan() {
			t.Fatalf("output ended: %v", sc.Err())
		}
		if sc.Text() != want {
			t.Errorf("line %d = %q, want %q", i, sc.Text(), want)
		}
	}

	var body []byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if string(body) != want+"\n" {
		t.Errorf("HTTP body = %q, want %q", body, want+"\n")
	}
	// The same address answers UDP.
	out, err := exec.CommandContext(t.Context(), program(t, "hello"), "-get", "udp://"+addr).Output()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("hello -get udp://%s = %q, %v; want %q", addr, out, err, want)
	}

	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("hello after SIGTERM: %v, want exit 0", err)
	}
}

// TestHelloGet runs hello -get as the tests' client against a server: one
// line per answer, each request on a new connection, a bearer token from a
// file; a refusal, an error status or a closed port is an "error:" line and
// exit 1.
func TestHelloGet(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "posted %s as %s\n", body, r.Header.Get("Content-Type"))
		case r.URL.Path == "/secret" && r.Header.Get("Authorization") != "Bearer s3cret":
			http.Error(w, "no token", http.StatusUnauthorized)
		default:
			fmt.Fprintf(w, "answer %d\nsecond line\n", n.Add(1))
		}
	}))
	defer srv.Close()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // a prefix of the output
		code int
	}{
		{"each answer on a line", []string{"-n", "3", "-get", srv.URL + "/"}, "answer 1 second line\nanswer 2 second line\nanswer 3 second line\n", 0},
		{"a token", []string{"-token", token, "-get", srv.URL + "/secret"}, "answer 4 second line\n", 0},
		{"a refusal is an error line", []string{"-get", srv.URL + "/secret"}, "error: 401 Unauthorized: no token\n", 1},
		{"not found", []string{"-get", srv.URL + "/missing"}, "error: 404 Not Found", 1},
		{"a closed port is an error line", []string{"-timeout", "1s", "-get", "http://" + closedAddr(t) + "/"}, "error: ", 1},
		{"a POST", []string{"-post", `{"a": 1}`, "-get", srv.URL + "/"}, "posted {\"a\": 1} as application/json\n", 0},
		{"a bad URL", []string{"-get", "::"}, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, exec.CommandContext(t.Context(), program(t, "hello"), tt.args...))
			if code != tt.code || !strings.HasPrefix(stdout, tt.want) {
				t.Errorf("hello %v: exit %d, output %q (stderr %q); want exit %d, output %q…",
					tt.args, code, stdout, stderr, tt.code, tt.want)
			}
		})
	}
}

// closedAddr is a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// run runs cmd and returns its output and exit code; it fails t when cmd
// cannot run at all.
func run(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestNFSServer runs nfsserver on a directory it creates and uses it as an
// NFS client does (go-nfs-client): MOUNT, then files written and listed
// through NFS appear in and come from the directory.
func TestNFSServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "export") // created by the server
	addr := closedAddr(t)
	cmd := exec.CommandContext(t.Context(), program(t, "nfsserver"), "-dir", dir, "-listen", addr)
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var client *rpc.Client
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if client, err = rpc.DialTCP("tcp", addr, false); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dialling nfsserver: %v; its log:\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer client.Close()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("the served directory: %v, %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "from-disk"), []byte("disk"), 0o644); err != nil {
		t.Fatal(err)
	}

	m := &nfs.Mount{Client: client}
	target, err := m.Mount("/export", rpc.AuthNull)
	if err != nil {
		t.Fatalf("MNT /export: %v", err)
	}
	f, err := target.OpenFile("from-nfs", 0o644)
	if err != nil {
		t.Fatalf("creating a file: %v", err)
	}
	if _, err := f.Write([]byte("over nfs")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "from-nfs")); err != nil || string(got) != "over nfs" {
		t.Errorf("the file written over NFS on disk: %q, %v", got, err)
	}
	ents, err := target.ReadDirPlus("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"from-disk", "from-nfs"}) {
		t.Errorf("READDIRPLUS of the export: %v", names)
	}
	if !strings.Contains(logs.String(), "path=/export") {
		t.Errorf("no mount logged:\n%s", logs.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("nfsserver after SIGTERM: %v, want exit 0; its log:\n%s", err, logs.String())
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
