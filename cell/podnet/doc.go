// Package podnet gives a cell's pod a network namespace of its own, apart
// from the instance's, where the agent, the instance's routes, its
// firewall and its path to the cloud's metadata stay.
//
// # What a pod gets
//
// The pod's namespace has lo and eth0, one end of a veth pair, with the
// pod's own address (a /32: the cloud routes it to the instance as a
// secondary address of its interface, an alias IP or a second IP
// configuration; the local plugin gives a second address on its bridge)
// and a default route through 169.254.1.1, a gateway that exists only as
// an answer to ARP on the other end, HostLink, in the instance's
// namespace (proxy ARP, as Calico does). The instance routes the address
// to HostLink and answers ARP for it on its uplink (the interface of its
// default route), so that the rest of the network reaches the pod at its
// own address, and forwards between the two; where a cloud's guest tools
// gave the address to the instance itself (a secondary address on its
// interface, a local route for an alias IP), Setup takes it back. Whatever
// the pod does inside
// its namespace (NET_ADMIN: addresses, routes, iptables rules, a
// service mesh's REDIRECT; its own net.* sysctls) changes nothing outside
// it.
//
// # What a pod does not reach
//
// In the instance's namespace, packets that come in on HostLink meet two
// chains of the filter table: InputChain drops everything addressed to
// the instance itself (the agent's port, anything else listening there)
// but answers to connections the instance opened,
// and ForwardChain drops what goes to the clouds' metadata and credential
// endpoints (Blocked: EC2's, Compute Engine's and Azure's instance
// metadata at 169.254.169.254, Azure's WireServer at 168.63.129.16), but
// for DNS (port 53, which Compute Engine and Azure serve there), and
// accepts the rest. HostLink drops packets whose source is not the pod's
// address (strict reverse-path filtering), and has no IPv6. A pod cannot
// change any of this: the rules live in a namespace it is not in.
//
// # Life
//
// Setup is idempotent: the namespace is pinned (a bind mount of it on the
// file NSFile under the directory it is given, in the agent's state
// directory), so that an agent that died and was started again finds it,
// with the pod's containers still in it, and Setup then only makes sure
// of the rest. Teardown removes it all. Do and DialContext run code and
// open connections inside a namespace (the agent's port-forward, its
// probes and hooks).
//
// Everything is done with the ip, iptables and iptables-restore commands,
// the tools an operator inspects the result with, as plugins/local does;
// the package imports no Kip package.
package podnet
