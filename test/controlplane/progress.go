package controlplane

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
)

// Progress returns a writer for a build's or a cluster's log that passes
// every byte to log (the Go tool's own output among them) and, for the few
// lines a person waiting at a terminal wants, writes one plain line to
// screen: a build's modules downloading (the control plane's, CoreDNS's,
// metrics-server's), a cold build starting, what it builds and about how long it
// takes (the "building … (cold: …; cached afterwards)" lines of this
// package's and test/modbuild's builds), and the build done. A warm run
// prints none of them. It is safe for concurrent use; a last line with no
// newline is never announced.
func Progress(screen, log io.Writer) io.Writer {
	return &progress{screen: screen, log: log}
}

type progress struct {
	mu          sync.Mutex
	screen, log io.Writer
	line        []byte // the current line, up to its newline
}

var (
	// "controlplane: resolving k8s.io/kubernetes@v1.36.3 for the control plane"
	resolvingRE = regexp.MustCompile(`^controlplane: resolving (\S+) for (.+)$`)
	// "modbuild: resolving coredns v1.15.0: github.com/coredns/coredns/core/dnsserver@v1.15.0 …"
	modResolvingRE = regexp.MustCompile(`^modbuild: resolving (\S+ \S+): `)
	// "controlplane: building the control plane (Kubernetes v1.36.3) into DIR (cold: about 7 minutes; cached afterwards): etcd, …"
	// "modbuild: building coredns v1.15.0 into DIR (cold: about 3 minutes; cached afterwards)"
	buildingRE = regexp.MustCompile(`^(?:controlplane|modbuild): building (.+?) into .+ \(cold: ([^;]+); cached afterwards\)`)
	// "controlplane: built in 6m48s", "modbuild: built coredns in 2m50s"
	builtRE = regexp.MustCompile(`^(?:controlplane|modbuild): built (?:\S+ )?in (\S+)$`)
)

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.log.Write(b)
	for rest := b[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			p.line = append(p.line, rest...)
			break
		}
		p.line = append(p.line, rest[:i]...)
		p.announce(string(p.line))
		p.line = p.line[:0]
		rest = rest[i+1:]
	}
	return n, err
}

// announce writes line's screen form, if it has one.
func (p *progress) announce(line string) {
	if m := resolvingRE.FindStringSubmatch(line); m != nil {
		fmt.Fprintf(p.screen, "  downloading the Go modules of %s for %s, once\n", m[1], m[2])
	} else if m := modResolvingRE.FindStringSubmatch(line); m != nil {
		fmt.Fprintf(p.screen, "  downloading the Go modules of %s, once\n", m[1])
	} else if m := buildingRE.FindStringSubmatch(line); m != nil {
		fmt.Fprintf(p.screen, "  building %s from source, %s, once\n", m[1], m[2])
	} else if m := builtRE.FindStringSubmatch(line); m != nil {
		fmt.Fprintf(p.screen, "  built in %s\n", m[1])
	}
}
