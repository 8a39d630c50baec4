package pluginapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// installNameRE is a plugin name that install may put in a file name: the
// <name> of kip-plugin-<name>, as kip's plugin.name accepts it.
var installNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// install copies the running executable to dir/kip-plugin-<name>, <name>
// being what p's GetInfo reports (the name kip checks against the file's),
// and prints the path, the plugin's version and the file's SHA-256 (what
// plugin.sha256 pins). It is the command an init container runs to fill
// the plugin directory kip's container mounts:
//
//	kip-plugin-mycloud install /var/lib/kip/plugins
//
// The copy is atomic: written to a temporary file in dir, made 0755,
// synced, then renamed over any older binary, so a kip reading the
// directory never sees half a file, and a running binary is replaced, not
// overwritten ("text file busy").
func install(p Provider, dir string, stdout, stderr io.Writer) int {
	info, err := getInfo(p)
	if err == nil && !installNameRE.MatchString(info.Name) {
		err = fmt.Errorf("name %q is not a plugin name (lower-case letters, digits, - and _)", info.Name)
	}
	if err != nil {
		fmt.Fprintf(stderr, "installing plugin: %v\n", err)
		return 1
	}
	src, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "installing plugin %s: finding its executable: %v\n", info.Name, err)
		return 1
	}
	dst := filepath.Join(dir, "kip-plugin-"+info.Name)
	sum, err := copyAtomically(src, dst)
	if err != nil {
		fmt.Fprintf(stderr, "installing plugin %s: %v\n", info.Name, err)
		return 1
	}
	fmt.Fprintf(stdout, "installed %s: kip-plugin-%s %s, sha256 %s\n", dst, info.Name, info.Version, sum)
	return 0
}

// getInfo returns p's GetInfo, validated.
func getInfo(p Provider) (*GetInfoResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := p.GetInfo(ctx, &GetInfoRequest{})
	if err == nil {
		err = ValidateInfo(info)
	}
	return info, err
}

// copyAtomically copies the file src to dst, mode 0755, through a
// temporary file beside dst and a rename, and returns the SHA-256 of what
// it wrote, in hexadecimal.
func copyAtomically(src, dst string) (sum string, err error) {
	in, err := os.Open(src) //nolint:gosec // G304: src is this process's own executable
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("creating a temporary file in %s: %w", filepath.Dir(dst), err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name()) //nolint:gosec // G703: the temporary file this function made in the operator's directory
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		return "", fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil { //nolint:gosec // G302: an executable for kip to run
		return "", fmt.Errorf("making %s executable: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil { //nolint:gosec // G703: dst is the operator's directory and a checked plugin name
		return "", fmt.Errorf("putting the copy in place: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
