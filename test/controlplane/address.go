package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// The API server's address for pods.
//
// Pods reach the API server through the "kubernetes" Service, whose
// endpoint is the server's advertise address. Loopback cannot be that
// address: in a cell, 127.0.0.1 is the cell's own loopback, and the API
// server refuses a loopback address for the Service's endpoints anyway.
// So the API server listens on every address and advertises the address
// of the interface that holds this machine's default route: an address of
// this machine that the local plugin's cells reach, since their default
// route goes through their bridge's gateway on this machine, where a
// packet for any of its addresses is delivered locally (no forwarding, no
// NAT). It is discovered, never assumed.

// routeTable is where Linux shows the IPv4 routing table.
const routeTable = "/proc/net/route"

// defaultRouteAddress is the first IPv4 address of the interface holding
// the default route (the lowest metric's).
func defaultRouteAddress() (netip.Addr, error) {
	f, err := os.Open(routeTable)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("finding the default route: %w", err)
	}
	defer f.Close()
	iface, err := defaultRouteInterface(f)
	if err != nil {
		return netip.Addr{}, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("finding the default route's interface %s: %w", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("reading the addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the default route's interface %s has no IPv4 address", iface)
}

// defaultRouteInterface reads a /proc/net/route table and names the
// interface of its default route with the lowest metric.
func defaultRouteInterface(r io.Reader) (string, error) {
	best, bestMetric := "", -1
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&0x1 == 0 { // RTF_UP
			continue
		}
		metric, err := strconv.Atoi(f[6])
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading the routing table: %w", err)
	}
	if best == "" {
		return "", errors.New("this machine has no IPv4 default route")
	}
	return best, nil
}
