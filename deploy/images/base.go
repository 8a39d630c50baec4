package images

import (
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The image's non-root user and group, as distroless's "nonroot".
const (
	UID  = 65532
	GID  = 65532
	User = "65532:65532"
	// UserName is the name of UID and GID in /etc/passwd and /etc/group.
	UserName = "kip"
)

// DefaultCACertificates is the CA bundle of Debian's ca-certificates
// package on the build machine, which the base copies to the same path.
const DefaultCACertificates = "/etc/ssl/certs/ca-certificates.crt"

// Path is the PATH of every image.
const Path = "PATH=/usr/local/bin:/usr/bin:/bin"

const (
	basePasswd = "root:x:0:0:root:/root:/sbin/nologin\n" + //nolint:gosec // G101: /etc/passwd entries with no password hashes, not credentials
		"kip:x:65532:65532:kip:/home/kip:/sbin/nologin\n"
	baseGroup     = "root:x:0:\nkip:x:65532:\n"
	baseNSSwitch  = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"
	pluginsDir    = "usr/local/lib/kip/plugins"
	binDir        = "usr/local/bin"
	caBundleInImg = "etc/ssl/certs/ca-certificates.crt"
)

// baseFiles returns the files of the base layer: the directory tree,
// /etc/passwd and /etc/group with root and kip (UID, GID), the CA bundle
// ca (the bytes of the build machine's bundle), /etc/nsswitch.conf, /tmp
// (1777) and /home/kip, kip's own.
func baseFiles(ca []byte) []File {
	dir := func(name string, mode int64) File { return File{Name: name, Mode: mode, Dir: true} }
	return []File{
		dir("etc", 0o755),
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		{Name: caBundleInImg, Mode: 0o644, Body: ca},
		{Name: "etc/passwd", Mode: 0o644, Body: []byte(basePasswd)},
		{Name: "etc/group", Mode: 0o644, Body: []byte(baseGroup)},
		{Name: "etc/nsswitch.conf", Mode: 0o644, Body: []byte(baseNSSwitch)},
		dir("home", 0o755),
		{Name: "home/kip", Mode: 0o700, Dir: true, UID: UID, GID: GID, Owner: UserName},
		dir("root", 0o700),
		dir("tmp", 0o1777),
		dir("usr", 0o755),
		dir("usr/local", 0o755),
		dir(binDir, 0o755),
		dir("usr/local/lib", 0o755),
		dir("usr/local/lib/kip", 0o755),
		dir(pluginsDir, 0o755),
	}
}

// baseLayer reads the CA bundle at caPath and returns the base layer.
func baseLayer(caPath string, mtime time.Time, compress Compressor) (v1.Layer, error) {
	ca, err := os.ReadFile(caPath) //nolint:gosec // G304: the operator's chosen CA bundle
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle (Debian's ca-certificates, installed by make deps): %w", err)
	}
	l, err := NewLayer(baseFiles(ca), mtime, compress)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	return l, nil
}
