package simhttp

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
)

// gzipAbove is the body size from which answers are compressed.
const gzipAbove = 1024

// Write writes an answer, gzip-compressed when it is larger than 1 KiB
// and the client accepts gzip (Go's transport asks for it and
// decompresses transparently), as the clouds' endpoints do.
func Write(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) {
	if len(body) > gzipAbove && acceptsGzip(r) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, enc := range strings.Split(v, ",") {
			if name, _, _ := strings.Cut(strings.TrimSpace(enc), ";"); name == "gzip" {
				return true
			}
		}
	}
	return false
}
