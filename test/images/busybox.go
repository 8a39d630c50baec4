package images

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	kipimages "github.com/kipcell/kip/deploy/images"
)

// DefaultBusyboxPath is where Debian's busybox-static package installs the
// binary.
const DefaultBusyboxPath = "/bin/busybox"

// BusyboxPathEnv names the environment variable that, when set, replaces
// DefaultBusyboxPath for Busybox.
const BusyboxPathEnv = "KIP_BUSYBOX"

// ErrNoBusybox is wrapped by the error of Busybox and BusyboxFrom when the
// binary is missing or is not a static build.
var ErrNoBusybox = errors.New("busybox-static is not installed: run make deps")

// Path is the PATH of every test image.
const Path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Applets are the busybox applets linked under /bin in the busybox image.
// Debian's busybox-static 1.35 has every one of them.
var Applets = []string{
	"[", "ash", "awk", "base64", "basename", "cat", "chmod", "chown", "cp",
	"cut", "date", "dd", "df", "dirname", "du", "echo", "env", "expr", "false",
	"find", "free", "grep", "gzip", "head", "hostname", "httpd", "id",
	"ifconfig", "ip", "kill", "less", "ln", "ls", "md5sum", "mkdir", "mkfifo",
	"more", "mount", "mv", "nc", "netstat", "nproc", "nslookup", "ping", "printf",
	"ps", "pwd", "readlink", "rm", "rmdir", "sed", "seq", "sh", "sha256sum",
	"sleep", "sort", "stat", "sync", "tail", "tar", "tee", "test", "timeout",
	"top", "touch", "tr", "true", "umount", "uname", "uniq", "uptime", "usleep",
	"vi", "watch", "wc", "wget", "which", "whoami", "xargs", "yes",
}

const (
	passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" //nolint:gosec // G101: /etc/passwd entries with no password hashes, not credentials
	group  = "root:x:0:\nnogroup:x:65534:\n"
)

var busybox struct {
	once sync.Once
	img  v1.Image
	err  error
}

// Busybox returns the busybox image built from $KIP_BUSYBOX, or
// DefaultBusyboxPath when that is unset. It is built once per process; a
// failure is returned to every caller.
func Busybox() (v1.Image, error) {
	busybox.once.Do(func() {
		path := os.Getenv(BusyboxPathEnv)
		if path == "" {
			path = DefaultBusyboxPath
		}
		busybox.img, busybox.err = BusyboxFrom(path)
	})
	return busybox.img, busybox.err
}

// BusyboxFrom builds the busybox image from the statically linked busybox
// binary at path. It is not cached. A missing or dynamically linked binary
// gives an error wrapping ErrNoBusybox.
func BusyboxFrom(path string) (v1.Image, error) {
	if err := checkStatic(path); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path) //nolint:gosec // G703: path is the caller's chosen busybox binary ($KIP_BUSYBOX); reading it is the point
	if err != nil {
		return nil, fmt.Errorf("reading busybox: %w", err)
	}

	files := []kipimages.File{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "dev", Mode: 0o755, Dir: true},
		{Name: "etc", Mode: 0o755, Dir: true},
		{Name: "proc", Mode: 0o555, Dir: true},
		{Name: "root", Mode: 0o700, Dir: true},
		{Name: "sys", Mode: 0o555, Dir: true},
		{Name: "tmp", Mode: 0o1777, Dir: true},
		{Name: "usr", Mode: 0o755, Dir: true},
		{Name: "usr/bin", Mode: 0o755, Dir: true},
		{Name: "var", Mode: 0o755, Dir: true},
		{Name: "bin/busybox", Mode: 0o755, Body: bin},
	}
	for _, a := range Applets {
		files = append(files, kipimages.File{Name: "bin/" + a, Mode: 0o777, Link: "busybox"})
	}
	files = append(files,
		// For scripts that start with #!/usr/bin/env.
		kipimages.File{Name: "usr/bin/env", Mode: 0o777, Link: "/bin/busybox"},
		kipimages.File{Name: "etc/passwd", Mode: 0o644, Body: []byte(passwd)},
		kipimages.File{Name: "etc/group", Mode: 0o644, Body: []byte(group)},
	)
	layer, err := newLayer(files)
	if err != nil {
		return nil, fmt.Errorf("building busybox layer: %w", err)
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: epoch},
			CreatedBy: "kip test/images: busybox from " + path,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building busybox image: %w", err)
	}
	return withConfig(img, func(c *v1.Config) {
		c.Cmd = []string{"sh"}
		c.Env = []string{Path}
		c.WorkingDir = "/"
	})
}

// checkStatic returns an error wrapping ErrNoBusybox unless path is a
// statically linked ELF executable. The busybox (not -static) package also
// installs /bin/busybox, dynamically linked, which cannot run in an image
// without a C library.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (no %s)", ErrNoBusybox, path)
	}
	if err != nil {
		return fmt.Errorf("reading busybox %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w (%s is dynamically linked)", ErrNoBusybox, path)
		}
	}
	return nil
}

// withConfig returns img with its config file's OS and architecture set to
// linux and runtime.GOARCH, its creation time fixed and edit applied to its
// runtime config.
func withConfig(img v1.Image, edit func(*v1.Config)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	edit(&cf.Config)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}
