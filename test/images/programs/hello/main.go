// Command hello is Kip's long-running test workload. Every second it prints
// "hello from <hostname>", followed by ": $MESSAGE" when MESSAGE is set, and
// it answers every HTTP request on -listen (default :8080) with the same
// line. It exits 0 on SIGTERM or SIGINT, so a graceful stop is quick even as
// a container's pid 1.
//
// With -get URL it is a client instead: it prints the body of a GET of URL
// and exits, 1 on an error. Its resolver is Go's own, which reads the
// pod's /etc/resolv.conf (nameserver, search path, ndots), so a pod calls
// a Service by its short name with it: kubectl exec POD -- /app -get
// http://hello. (busybox's wget cannot: its static glibc crashes looking
// up the port of http without the C library's shared objects.)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "HTTP listen address")
	interval := flag.Duration("interval", time.Second, "time between printed lines")
	get := flag.String("get", "", "print the body of a GET of this URL and exit")
	flag.Parse()
	if *get != "" {
		if err := fetch(*get); err != nil {
			fmt.Fprintln(os.Stderr, "hello:", err)
			os.Exit(1)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("hello: %v", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, line())
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		_ = srv.Serve(ln)
	}()

	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		fmt.Println(line())
		select {
		case <-ctx.Done():
			fmt.Println("hello: stopping")
			return
		case <-t.C:
		}
	}
}

func line() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	s := "hello from " + host
	if m := os.Getenv("MESSAGE"); m != "" {
		s += ": " + m
	}
	return s
}

// fetch prints the body of a GET of url, within 10 seconds; a status
// other than 200 is an error.
func fetch(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}
