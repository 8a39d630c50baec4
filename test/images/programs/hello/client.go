package main

// The client of hello -get: one line per answer, the answer with its
// whitespace collapsed to single spaces (a JSON body fits a line), or
// "error: ..." for a failed request. URL is http://, https:// (verified
// against -ca when given; -token adds the file's content as a bearer
// token) or udp://host:port, for which it sends one datagram and prints
// the first datagram that comes back.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// request is how the client asks: the flags of hello -get.
type request struct {
	caFile    string // verifies an https server; empty: the system's CAs
	tokenFile string // holds a bearer token; empty: none
	post      string // a JSON body to POST; empty: a GET
	timeout   time.Duration
}

// client asks rawURL n times and prints the answers; it returns the exit
// code: 0, 1 if any request failed, 2 for a bad URL or flag.
func client(rawURL string, n int, r request) int {
	ask, err := asker(rawURL, r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		return 2
	}
	failed := false
	for range n {
		answer, err := ask()
		if err != nil {
			failed = true
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(answer)
	}
	if failed {
		return 1
	}
	return 0
}

// asker returns a function that asks rawURL once and returns the answer
// on one line.
func asker(rawURL string, r request) (func() (string, error), error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "udp" {
		return func() (string, error) { return askUDP(u.Host, r.timeout) }, nil
	}
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if r.caFile != "" {
		pem, err := os.ReadFile(r.caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no certificate", r.caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	client := &http.Client{Transport: tr, Timeout: r.timeout}
	return func() (string, error) {
		method, body := http.MethodGet, io.Reader(nil)
		if r.post != "" {
			method, body = http.MethodPost, strings.NewReader(r.post)
		}
		req, err := http.NewRequest(method, rawURL, body)
		if err != nil {
			return "", err
		}
		if r.post != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.tokenFile != "" {
			token, err := os.ReadFile(r.tokenFile)
			if err != nil {
				return "", err
			}
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return "", err
		}
		answer := strings.Join(strings.Fields(string(data)), " ")
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("%s: %s", resp.Status, answer)
		}
		return answer, nil
	}, nil
}

// askUDP sends a datagram to addr from a new socket and reads one back.
func askUDP(addr string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("udp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("hello -get\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		return "", err
	}
	return strings.Join(strings.Fields(line), " "), nil
}

// serviceAccountDir is where the API server mounts a pod's kube-api-access
// volume (rest.InClusterConfig reads the same files).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inCluster sets r up as client-go's rest.InClusterConfig does and returns
// the API server's URL: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// verified with the service account's ca.crt, with its token.
func inCluster(r *request) (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", errors.New("not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
	}
	r.caFile, r.tokenFile = serviceAccountDir+"/ca.crt", serviceAccountDir+"/token"
	return "https://" + net.JoinHostPort(host, port), nil
}
