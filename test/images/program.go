package images

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	kipimages "github.com/kipcell/kip/deploy/images"
)

// ProgramsPkg is the import path of the directory holding the test
// programs; ProgramsPkg + "/hello" is the hello program.
const ProgramsPkg = "github.com/kipcell/kip/test/images/programs"

// Programs are the test programs under programs/, in the order PushAll
// pushes them.
var Programs = []string{"hello", "crash", "logger", "nfsserver"}

// GoOptions configures GoProgram. The zero value builds in the current
// directory on top of Busybox.
type GoOptions struct {
	// Dir is the directory go build runs in. The package must belong to the
	// module or workspace of Dir. Empty means the current directory.
	Dir string

	// Base is the image the binary is added to; Busybox when nil.
	Base v1.Image

	// Env is appended to the base image's environment.
	Env []string
}

// GoProgram builds the Go main package pkg (an import path, or a path
// relative to opts.Dir) with go build -trimpath, CGO_ENABLED=0, GOOS=linux
// and GOARCH=runtime.GOARCH, and returns opts.Base plus one layer holding
// the static binary as /app, with Entrypoint ["/app"] and no Cmd.
//
// The compiled layer is cached per process by directory and package, so
// later calls with the same pair only assemble the image.
func GoProgram(pkg string, opts GoOptions) (v1.Image, error) {
	base := opts.Base
	if base == nil {
		var err error
		if base, err = Busybox(); err != nil {
			return nil, err
		}
	}
	layer, err := programLayer(pkg, opts.Dir)
	if err != nil {
		return nil, err
	}
	img, err := withEntrypoint(base, layer, "kip test/images: go build "+pkg, "/app", func(c *v1.Config) {
		c.Env = append(append([]string(nil), c.Env...), opts.Env...)
	})
	if err != nil {
		return nil, fmt.Errorf("building image of %s: %w", pkg, err)
	}
	return img, nil
}

// withEntrypoint returns base plus layer, which holds the executable
// entrypoint (an absolute path), recorded in the history as createdBy,
// with Entrypoint [entrypoint], no Cmd, the working directory / and the
// environment PATH when it has none; edit, if not nil, changes the config
// further before that default.
func withEntrypoint(base v1.Image, layer v1.Layer, createdBy, entrypoint string, edit func(*v1.Config)) (v1.Image, error) {
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, err
	}
	return withConfig(img, func(c *v1.Config) {
		c.Entrypoint = []string{entrypoint}
		c.Cmd = nil
		if edit != nil {
			edit(c)
		}
		if len(c.Env) == 0 {
			c.Env = []string{Path}
		}
		c.WorkingDir = "/"
	})
}

type programKey struct{ dir, pkg string }

type programEntry struct {
	once  sync.Once
	layer v1.Layer
	err   error
}

var programCache sync.Map // programKey -> *programEntry

// programLayer builds pkg in dir once per process and returns the layer
// holding the binary as /app.
func programLayer(pkg, dir string) (v1.Layer, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	v, _ := programCache.LoadOrStore(programKey{abs, pkg}, &programEntry{})
	e := v.(*programEntry)
	e.once.Do(func() {
		var bin []byte
		if bin, e.err = goBuild(pkg, abs); e.err != nil {
			return
		}
		e.layer, e.err = newLayer([]kipimages.File{{Name: "app", Mode: 0o755, Body: bin}})
		if e.err != nil {
			e.err = fmt.Errorf("building layer of %s: %w", pkg, e.err)
		}
	})
	return e.layer, e.err
}

// goBuild compiles pkg in dir into a static linux binary and returns it.
func goBuild(pkg, dir string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "kip-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, path.Base(pkg))

	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s in %s: %w: %s", pkg, dir, err, strings.TrimSpace(stderr.String()))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("reading the binary of %s: %w", pkg, err)
	}
	return bin, nil
}
