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

// client asks rawURL n times and prints the answers; it returns the exit
// code: 0, 1 if any request failed, 2 for a bad URL or flag.
func client(rawURL string, n int, caFile, tokenFile string, timeout time.Duration) int {
	ask, err := asker(rawURL, caFile, tokenFile, timeout)
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
func asker(rawURL, caFile, tokenFile string, timeout time.Duration) (func() (string, error), error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "udp" {
		return func() (string, error) { return askUDP(u.Host, timeout) }, nil
	}
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no certificate", caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	client := &http.Client{Transport: tr, Timeout: timeout}
	return func() (string, error) {
		req, err := http.NewRequest(http.MethodGet, rawURL, nil)
		if err != nil {
			return "", err
		}
		if tokenFile != "" {
			token, err := os.ReadFile(tokenFile)
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
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return "", err
		}
		answer := strings.Join(strings.Fields(string(body)), " ")
		if resp.StatusCode != http.StatusOK {
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
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", err
	}
	return strings.Join(strings.Fields(line), " "), nil
}
