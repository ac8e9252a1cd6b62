package kubeproxy

import (
	"net/netip"

	netutils "k8s.io/utils/net"
)

// family is an IP address family.
type family uint8

const (
	ipv4 family = iota + 1
	ipv6
)

// ipFamily reports whether s is an IP address in kube-proxy's sense (Go's
// net.ParseIP, plus the leading zeros kube-proxy tolerates) and its family;
// IPv4-mapped IPv6 addresses count as IPv4, as they do for net.IP.To4. The
// common case is parsed with net/netip, which does not allocate; only what
// netip rejects is handed to the lenient parser for a second opinion.
func ipFamily(s string) (family, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return 0, false // net.ParseIP has no zones
		}
		return addrFamily(a), true
	}
	ip := netutils.ParseIPSloppy(s)
	if ip == nil {
		return 0, false
	}
	if ip.To4() != nil {
		return ipv4, true
	}
	return ipv6, true
}

// isIPv4 reports whether s is an IPv4 (or IPv4-mapped) address.
func isIPv4(s string) bool {
	f, ok := ipFamily(s)
	return ok && f == ipv4
}

// cidrFamily reports whether s is a CIDR in kube-proxy's sense (Go's
// net.ParseCIDR plus leading zeros) and the family of its masked network
// address, which is what net.IPNet.IP.To4 sees.
func cidrFamily(s string) (family, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return addrFamily(p.Masked().Addr()), true
	}
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return 0, false
	}
	if n.IP.To4() != nil {
		return ipv4, true
	}
	return ipv6, true
}

func addrFamily(a netip.Addr) family {
	if a.Unmap().Is4() {
		return ipv4
	}
	return ipv6
}
