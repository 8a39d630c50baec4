package imds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultEndpoint is EC2's instance metadata address.
const DefaultEndpoint = "http://169.254.169.254"

// TokenTTL is the lifetime asked for an IMDSv2 token: EC2's maximum, six
// hours. A token is fetched again tokenMargin before it expires.
const (
	TokenTTL    = 6 * time.Hour
	tokenMargin = time.Minute
)

// requestTimeout bounds one request: the IMDS answers in milliseconds, and
// where there is none (not EC2) the agent must not hang on it.
const requestTimeout = 5 * time.Second

// maxBody bounds an answer (user data is at most 16 KiB).
const maxBody = 1 << 20

// ErrNotFound is the IMDS's 404: the path does not exist, or (for
// spot/instance-action and the rebalance recommendation) there is no notice.
var ErrNotFound = errors.New("not found in instance metadata")

// StatusError is an answer other than 200 or 404.
type StatusError struct {
	Path   string
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("instance metadata %s: HTTP %d %s", e.Path, e.Status, http.StatusText(e.Status))
}

// Client reads an instance's metadata. It is safe for concurrent use.
type Client struct {
	base string // scheme and host of the requests
	hc   *http.Client
	now  func() time.Time

	mu      sync.Mutex
	token   string
	expires time.Time
}

// New returns a client of the IMDS at endpoint: http://host[:port] (EC2:
// DefaultEndpoint) or unix:///path/to/socket.
func New(endpoint string) (*Client, error) {
	base, hc, err := dial(endpoint, "169.254.169.254")
	if err != nil {
		return nil, err
	}
	return &Client{base: base, hc: hc, now: time.Now}, nil
}

// dial returns the scheme and host requests to endpoint go to and the HTTP
// client that reaches it: http://host[:port], or unix:///path (requests
// then name host, as they would the real service). No proxy applies.
func dial(endpoint, host string) (string, *http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", nil, fmt.Errorf("parsing the instance metadata endpoint %q: %w", endpoint, err)
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: time.Minute}
	base := ""
	switch u.Scheme {
	case "http":
		if u.Host == "" {
			return "", nil, fmt.Errorf("parsing the instance metadata endpoint %q: no host", endpoint)
		}
		base = "http://" + u.Host
	case "unix":
		path := u.Path
		if path == "" {
			return "", nil, fmt.Errorf("parsing the instance metadata endpoint %q: no socket path", endpoint)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		base = "http://" + host
	default:
		return "", nil, fmt.Errorf("parsing the instance metadata endpoint %q: scheme must be http or unix", endpoint)
	}
	return base, &http.Client{Transport: tr, Timeout: requestTimeout}, nil
}

// Get reads a path under /latest/ ("meta-data/instance-id", "user-data",
// "dynamic/instance-identity/document"; a leading "/latest/" is allowed).
// A missing path is ErrNotFound.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	path = "/latest/" + strings.TrimPrefix(strings.TrimPrefix(path, "/"), "latest/")
	for attempt := 0; ; attempt++ {
		token, err := c.sessionToken(ctx)
		if err != nil {
			return nil, err
		}
		body, status, err := c.do(ctx, http.MethodGet, path, map[string]string{"X-aws-ec2-metadata-token": token})
		if err != nil {
			return nil, fmt.Errorf("reading instance metadata %s: %w", path, err)
		}
		switch status {
		case http.StatusOK:
			return body, nil
		case http.StatusNotFound:
			return nil, fmt.Errorf("reading instance metadata %s: %w", path, ErrNotFound)
		case http.StatusUnauthorized:
			// The token expired or the IMDS forgot it: a new one, once.
			c.dropToken(token)
			if attempt == 0 {
				continue
			}
		}
		return nil, &StatusError{Path: path, Status: status}
	}
}

// sessionToken is the cached IMDSv2 token, fetched when there is none or
// it is about to expire.
func (c *Client) sessionToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.now().Before(c.expires.Add(-tokenMargin)) {
		return c.token, nil
	}
	asked := c.now()
	ttl := strconv.Itoa(int(TokenTTL / time.Second))
	body, status, err := c.do(ctx, http.MethodPut, "/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": ttl})
	if err != nil {
		return "", fmt.Errorf("getting an instance metadata token: %w", err)
	}
	if status != http.StatusOK {
		return "", &StatusError{Path: "/latest/api/token", Status: status}
	}
	c.token, c.expires = string(body), asked.Add(TokenTTL)
	return c.token, nil
}

// dropToken forgets token, unless another request already replaced it.
func (c *Client) dropToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == token {
		c.token = ""
	}
}

func (c *Client) do(ctx context.Context, method, path string, header map[string]string) ([]byte, int, error) {
	a, err := do(ctx, c.hc, method, c.base+path, header)
	if err != nil {
		return nil, 0, err
	}
	return a.body, a.status, nil
}

// answer is what do read of a response: its status, header and body (the
// body closed).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and reads its answer (at most maxBody).
func do(ctx context.Context, hc *http.Client, method, url string, header map[string]string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// IdentityDocument reads the instance identity document and its
// signature, each as the IMDS gives it: doc the JSON document, sig the
// signature path's text (base64 of EC2's RSA SHA-256 signature over doc,
// possibly in several lines), which a verifier decodes.
func (c *Client) IdentityDocument(ctx context.Context) (doc, sig []byte, err error) {
	doc, err = c.Get(ctx, "dynamic/instance-identity/document")
	if err != nil {
		return nil, nil, err
	}
	sig, err = c.Get(ctx, "dynamic/instance-identity/signature")
	if err != nil {
		return nil, nil, err
	}
	return doc, bytes.TrimSpace(sig), nil
}

// InstanceAction is EC2's spot interruption notice
// (meta-data/spot/instance-action).
type InstanceAction struct {
	// Action is terminate, stop or hibernate.
	Action string `json:"action"`
	// Time is when EC2 acts.
	Time time.Time `json:"time"`
}

// InstanceAction reads the spot interruption notice; nil without one.
func (c *Client) InstanceAction(ctx context.Context) (*InstanceAction, error) {
	var a InstanceAction
	ok, err := c.getJSON(ctx, "meta-data/spot/instance-action", &a)
	if !ok {
		return nil, err
	}
	return &a, nil
}

// Rebalance is EC2's rebalance recommendation
// (meta-data/events/recommendations/rebalance).
type Rebalance struct {
	// NoticeTime is when EC2 made it.
	NoticeTime time.Time `json:"noticeTime"`
}

// RebalanceRecommendation reads the rebalance recommendation; nil without
// one.
func (c *Client) RebalanceRecommendation(ctx context.Context) (*Rebalance, error) {
	var r Rebalance
	ok, err := c.getJSON(ctx, "meta-data/events/recommendations/rebalance", &r)
	if !ok {
		return nil, err
	}
	return &r, nil
}

// getJSON decodes a JSON path into v; ok is false when the path is
// missing (err nil) or unreadable.
func (c *Client) getJSON(ctx context.Context, path string, v any) (ok bool, err error) {
	b, err := c.Get(ctx, path)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decoding instance metadata %s: %w", path, err)
	}
	return true, nil
}
