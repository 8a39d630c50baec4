package userdata

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"
)

// Media types of the user data's parts. cloud-init runs the text/cloud-config
// part and ignores the bootstrap part; kip-cell --bootstrap reads the
// bootstrap part from the whole user data (Bootstrap).
const (
	MediaTypeCloudConfig = "text/cloud-config"
	MediaTypeBootstrap   = "application/vnd.kipcell.bootstrap+json"
)

// Build returns a cell's user data: a MIME multipart/mixed document
// with the cloud-config (when cloudConfig is not empty) and then the
// bootstrap, each verbatim:
//
//	Content-Type: multipart/mixed; boundary="kipcell-<hex>"
//	MIME-Version: 1.0
//
//	--kipcell-<hex>
//	Content-Type: text/cloud-config; charset="utf-8"
//	Content-Disposition: attachment; filename="cloud-config.yaml"
//
//	#cloud-config ...
//	--kipcell-<hex>
//	Content-Type: application/vnd.kipcell.bootstrap+json
//	Content-Disposition: attachment; filename="kip-bootstrap.json"
//
//	{"version":1,...}
//	--kipcell-<hex>--
//
// Lines end in CRLF. An empty bootstrap leaves its part out (and both empty
// give no user data at all). The boundary is derived from the contents, so the same
// inputs give the same bytes: a retried RunInstances carries the same user
// data as the first, which its ClientToken requires.
func Build(cloudConfig, bootstrap []byte) ([]byte, error) {
	if len(cloudConfig) == 0 && len(bootstrap) == 0 {
		return nil, nil
	}
	sum := sha256.New()
	sum.Write(cloudConfig)
	sum.Write([]byte{0})
	sum.Write(bootstrap)
	boundary := "kipcell-" + hex.EncodeToString(sum.Sum(nil))[:32]
	if bytes.Contains(cloudConfig, []byte(boundary)) || bytes.Contains(bootstrap, []byte(boundary)) {
		return nil, errors.New("building user data: the contents hold their own MIME boundary")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\r\nMIME-Version: 1.0\r\n\r\n", boundary)
	part := func(mediaType, filename string, body []byte) {
		fmt.Fprintf(&b, "--%s\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=%q\r\n\r\n", boundary, mediaType, filename)
		b.Write(body)
		b.WriteString("\r\n")
	}
	if len(cloudConfig) > 0 {
		part(MediaTypeCloudConfig+`; charset="utf-8"`, "cloud-config.yaml", cloudConfig)
	}
	if len(bootstrap) > 0 {
		part(MediaTypeBootstrap, "kip-bootstrap.json", bootstrap)
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes(), nil
}

// Bootstrap returns the bootstrap part of user data that Build made, byte for byte. It also accepts a bare bootstrap (JSON,
// first non-space byte '{'), returned unchanged, and a part in base64
// (Content-Transfer-Encoding: base64), which other tools may produce.
func Bootstrap(userData []byte) ([]byte, error) {
	if trimmed := bytes.TrimSpace(userData); len(trimmed) > 0 && trimmed[0] == '{' {
		return userData, nil
	}
	header, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(userData))).ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("reading user data: neither a bootstrap (JSON) nor MIME: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return nil, fmt.Errorf("reading user data: Content-Type %q is not multipart with a boundary", header.Get("Content-Type"))
	}
	// The body starts after the header's blank line.
	body := userData
	for _, sep := range []string{"\r\n\r\n", "\n\n"} {
		if i := bytes.Index(userData, []byte(sep)); i >= 0 {
			body = userData[i+len(sep):]
			break
		}
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := r.NextRawPart()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading user data: no %s part", MediaTypeBootstrap)
		}
		if err != nil {
			return nil, fmt.Errorf("reading user data: %w", err)
		}
		if mt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); mt != MediaTypeBootstrap {
			continue
		}
		var data []byte
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
			data, err = io.ReadAll(base64.NewDecoder(base64.StdEncoding, newlineStripper{p}))
		} else {
			data, err = io.ReadAll(p)
		}
		if err != nil {
			return nil, fmt.Errorf("reading user data: the %s part: %w", MediaTypeBootstrap, err)
		}
		return data, nil
	}
}

// newlineStripper drops CR and LF, which MIME base64 wraps lines with.
type newlineStripper struct{ r io.Reader }

func (s newlineStripper) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	out := p[:0]
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' {
			out = append(out, c)
		}
	}
	return len(out), err
}
