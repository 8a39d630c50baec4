// Command hello is Kip's long-running test workload. Every second it prints
// "hello from <hostname>", followed by ": $MESSAGE" when MESSAGE is set, and
// it answers every HTTP request on -listen (default :8080), and every UDP
// datagram to the same address, with the same line. It exits 0 on SIGTERM
// or SIGINT, so a graceful stop is quick even as a container's pid 1.
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
	listen := flag.String("listen", ":8080", "HTTP listen address")
	interval := flag.Duration("interval", time.Second, "time between printed lines")
	flag.Parse()

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
