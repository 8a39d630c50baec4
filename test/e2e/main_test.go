//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kipcell/kip/test/e2e/framework"
)

// f is the run's shared control plane.
var f *framework.Framework

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	var err error
	f, err = framework.Setup(ctx, os.Stderr)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := f.Teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tearing down the control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
