// Command hello is Kip's long-running test workload. Every second it prints
// "hello from <hostname>", followed by ": $MESSAGE" when MESSAGE is set, and
// it answers every HTTP request on -listen (default :8080), and every UDP
// datagram to the same address, with the same line. It exits 0 on SIGTERM
// or SIGINT, so a graceful stop is quick even as a container's pid 1;
// with -on-term URL it first sends a GET to URL (how a test sees when the
// stop signal came, e.g. after a preStop hook). With -forward URL it GETs
// URL before it answers each HTTP request (how a test sees a request to the
// pod, such as an httpGet hook's, which has no host and so goes to the
// pod's own address).
//
// With -get URL it is the tests' client instead (client.go): it asks URL
// -n times, each on a new connection (so that a Service balances every
// request), prints one line per answer and exits, 1 if any request
// failed.
//
//	hello -get URL [-n N] [-ca FILE] [-token FILE] [-post JSON] [-timeout D]
//
// With -api PATH it asks the API server for PATH as client-go's
// rest.InClusterConfig would: the server from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, verified with the service account volume's
// ca.crt, its token as the bearer; nothing else is given.
//
// With -burn N it also keeps N goroutines busy, about N cores less what
// its CPU limit allows: the CPU-burning pod of the stats and autoscaling
// tests.
//
// Its resolver is Go's own, which reads the pod's /etc/resolv.conf
// (nameserver, search path, ndots), so a pod calls a Service by its short
// name with it: kubectl exec POD -- /app -get http://hello. (busybox's
// wget cannot: its static glibc crashes looking up the port of http
// without the C library's shared objects.)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "HTTP and UDP listen address")
	interval := flag.Duration("interval", time.Second, "time between printed lines")
	get := flag.String("get", "", "be a client: ask this URL (http, https or udp://host:port), print the answers and exit")
	n := flag.Int("n", 1, "with -get: requests, each on its own connection")
	caFile := flag.String("ca", "", "with -get: CA bundle that verifies an https server (default: the system's)")
	tokenFile := flag.String("token", "", "with -get: file holding a bearer token for http(s)")
	post := flag.String("post", "", "with -get: POST this body (JSON) instead of a GET")
	timeout := flag.Duration("timeout", 3*time.Second, "with -get: time limit of each request")
	api := flag.String("api", "", "be a client of the API server, as client-go's in-cluster config is: GET this path")
	onTerm := flag.String("on-term", "", "on SIGTERM or SIGINT, GET this URL before exiting")
	burn := flag.Int("burn", 0, "also keep this many goroutines busy (CPU load)")
	forward := flag.String("forward", "", "before answering an HTTP request, GET this URL (how a test sees a request to the pod arrive, e.g. an httpGet hook's)")
	flag.Parse()
	r := request{caFile: *caFile, tokenFile: *tokenFile, post: *post, timeout: *timeout}
	if *api != "" {
		url, err := inCluster(&r)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hello:", err)
			os.Exit(2)
		}
		*get = url + *api
	}
	if *get != "" {
		os.Exit(client(*get, *n, r))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for range *burn {
		go spin(ctx)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("hello: %v", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if *forward != "" {
				client(*forward, 1, request{timeout: *timeout})
			}
			fmt.Fprintln(w, line())
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		_ = srv.Serve(ln)
	}()
	pc, err := net.ListenPacket("udp", *listen)
	if err != nil {
		log.Fatalf("hello: %v", err)
	}
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(line()+"\n"), from)
		}
	}()

	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		fmt.Println(line())
		select {
		case <-ctx.Done():
			fmt.Println("hello: stopping")
			if *onTerm != "" {
				client(*onTerm, 1, request{timeout: *timeout})
			}
			return
		case <-t.C:
		}
	}
}

// spin keeps a core busy until ctx ends.
func spin(ctx context.Context) {
	for n := uint64(0); ; n++ {
		if n%(1<<20) == 0 && ctx.Err() != nil {
			return
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
