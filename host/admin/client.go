package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kipcell/kip/host/metrics"
)

// DefaultURL is the admin server of a kip on this machine with the
// default listenAddress.
const DefaultURL = "http://" + DefaultListenAddress

// URLOf is the URL a client on this machine reaches a server listening on
// listenAddress at: an unspecified host (":10262", "0.0.0.0:10262",
// "[::]:10262") is loopback.
func URLOf(listenAddress string) string {
	host, port, err := net.SplitHostPort(listenAddress)
	if err != nil {
		return "http://" + listenAddress
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// clientTimeout bounds a client's request.
const clientTimeout = 10 * time.Second

// Cells asks the admin server at url (http://host:port, or host:port) for
// the node's cells, with token as its bearer token ("": none, enough only
// with admin.authorization none). An error says when nothing answers
// there, and what a 401 or 403 wants.
func Cells(ctx context.Context, url, token string) ([]metrics.Cell, error) {
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	ctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+PathCells, nil)
	if err != nil {
		return nil, fmt.Errorf("asking kip at %s for its cells: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kip is not reachable at %s (is `kip run` running there, with admin.off false? --address names another): %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		var hint string
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			hint = " (kip serves /cells to a token the cluster authenticates: pass one with --token-file or --token, e.g. of a ServiceAccount bound to the ClusterRole kip-cells-reader)"
		case http.StatusForbidden:
			hint = " (the token's user may not get /cells: bind it to the ClusterRole kip-cells-reader)"
		}
		return nil, fmt.Errorf("asking kip at %s for its cells: %s: %s%s", url, resp.Status, strings.TrimSpace(string(body)), hint)
	}
	var cells []metrics.Cell
	if err := json.NewDecoder(resp.Body).Decode(&cells); err != nil {
		return nil, fmt.Errorf("reading the cells kip at %s sent: %w", url, err)
	}
	return cells, nil
}
