package bottlerocket

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The checks in this file follow the Bottlerocket API's modeled types (see
// doc.go for the sources): a value that fails them would be refused by the
// Bottlerocket API when the node applies its user data.

// matchQuantity reports whether s fits Bottlerocket's KubernetesQuantityValue
// pattern: digits and dots with an optional sign, then nothing, a lower-case
// exponent ("e" and digits), a decimal or binary suffix (K, M, G, T, P, E,
// each optionally followed by "i") or a small-unit suffix (n, u, m, k). The
// test file holds Bottlerocket's regular expression and checks this function
// against it.
func matchQuantity(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
		j++
	}
	if j == i {
		return false
	}
	rest := s[j:]
	switch {
	case rest == "":
		return true
	case rest[0] == 'e':
		return allDigits(rest[1:])
	case strings.IndexByte("EPTGMK", rest[0]) >= 0:
		return len(rest) == 1 || (len(rest) == 2 && rest[1] == 'i')
	default:
		return len(rest) == 1 && strings.IndexByte("numk", rest[0]) >= 0
	}
}

// matchDuration reports whether s fits Bottlerocket's
// KubernetesDurationValue pattern: up to four parts, hours, minutes, seconds
// and milliseconds, each optional but in that order, each a whole number or
// a decimal with digits on both sides of the dot. Like the pattern, it
// accepts the empty string; callers never pass one.
func matchDuration(s string) bool {
	next := 0                     // units must come in the order h, m, s, ms
	unitLen := [4]int{1, 1, 1, 2} // lengths of h, m, s, ms
	for s != "" {
		n := numberPrefix(s)
		if n == 0 {
			return false
		}
		s = s[n:]
		u := -1
		switch {
		case strings.HasPrefix(s, "ms"):
			u = 3
		case strings.HasPrefix(s, "h"):
			u = 0
		case strings.HasPrefix(s, "m"):
			u = 1
		case strings.HasPrefix(s, "s"):
			u = 2
		}
		if u < next {
			return false
		}
		s = s[unitLen[u]:]
		next = u + 1
	}
	return true
}

// numberPrefix returns the length of the longest prefix of s of the form
// digits, or digits "." digits; 0 if there is none.
func numberPrefix(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 {
		return 0
	}
	if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i
}

// matchDecimal reports whether s is a plain decimal: digits with an optional
// fraction, or a dot and digits. Bottlerocket parses the number of a
// percentage threshold as a float; limiting it to plain decimals keeps words
// such as "inf" or "NaN", which float parsers take, out.
func matchDecimal(s string) bool {
	if s == "" || s == "." {
		return false
	}
	whole, frac, _ := strings.Cut(s, ".")
	return allDigits(whole) && allDigits(frac)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// evictionSignals are the keys Bottlerocket accepts in eviction-hard,
// eviction-soft and eviction-soft-grace-period (KubernetesEvictionKey). The
// kubelet knows more (containerfs.*, allocatableMemory.available).
func evictionSignals() []string {
	return []string{
		"memory.available",
		"nodefs.available",
		"nodefs.inodesFree",
		"imagefs.available",
		"imagefs.inodesFree",
		"pid.available",
	}
}

// reservedResources are the keys Bottlerocket accepts in kube-reserved and
// system-reserved (KubernetesReservedResourceKey). The kubelet also knows pid.
func reservedResources() []string { return []string{"cpu", "memory", "ephemeral-storage"} }

// fitQuantity returns s if Bottlerocket accepts it as written, or else the same
// quantity in SI notation (for example "1E3" becomes "1k" and "1e-3" becomes
// "1m"). It refuses strings that are not Kubernetes quantities.
func fitQuantity(s string) (string, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a Kubernetes quantity", s)
	}
	if matchQuantity(s) {
		return s, nil
	}
	// An upper-case or signed exponent ("1E3", "1e-3") fits Bottlerocket's
	// pattern only in SI notation ("1k", "1m"). Quantity.String would keep
	// the user's notation, so the value is rebuilt in DecimalSI; it is the
	// value the kubelet reads from either spelling.
	si := resource.NewDecimalQuantity(*q.AsDec(), resource.DecimalSI)
	if canon := si.String(); matchQuantity(canon) {
		return canon, nil
	}
	return "", fmt.Errorf("quantity %q has no spelling that Bottlerocket accepts", s)
}

// fitThreshold accepts a percentage in [0%, 100%) or a quantity, as
// Bottlerocket's KubernetesThresholdValue does.
func fitThreshold(s string) (string, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return fitQuantity(s)
	}
	if !matchDecimal(num) {
		return "", fmt.Errorf("%q is not a percentage", s)
	}
	f, err := strconv.ParseFloat(num, 32)
	if err != nil || f < 0 || f >= 100 {
		return "", fmt.Errorf("percentage %q is outside the range Bottlerocket accepts, 0%% up to but not including 100%%", s)
	}
	return s, nil
}

// fitDurationString parses a Go duration string (as in
// evictionSoftGracePeriod) and returns it as written if Bottlerocket accepts
// that spelling, or else the spelling formatDuration gives.
func fitDurationString(s string) (string, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a duration", s)
	}
	if d < 0 {
		return "", fmt.Errorf("negative duration %q: Bottlerocket accepts only durations of zero or more", s)
	}
	if matchDuration(s) {
		return s, nil
	}
	return formatDuration(d), nil
}

// fitDuration formats a metav1.Duration value for Bottlerocket.
func fitDuration(d time.Duration) (string, error) {
	if d < 0 {
		return "", fmt.Errorf("negative duration %s: Bottlerocket accepts only durations of zero or more", d)
	}
	return formatDuration(d), nil
}

// formatDuration spells d in Bottlerocket's duration grammar, which has
// hours, minutes, seconds and milliseconds but no µs or ns units. Go's own
// spelling already fits from one millisecond up ("1h0m0s", "1.5s", "250ms");
// below that Go switches to µs or ns, so those are written as a fraction of a
// millisecond ("0.0015ms"), which the kubelet parses back to the same value.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d >= time.Millisecond {
		return d.String()
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", int64(d)), "0")
	return "0." + frac + "ms"
}

// ipAddress accepts an IPv4 or IPv6 address without a zone, as Rust's IpAddr
// (which Bottlerocket's cluster-dns-ip uses) does.
func ipAddress(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return "", fmt.Errorf("IP address %q has a zone, which Bottlerocket does not accept", s)
	}
	return s, nil
}

// singleLine accepts what Bottlerocket's SingleLineString accepts: valid
// UTF-8 without control characters or Unicode line separators.
func singleLine(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("%q contains a control character or line break (%U)", s, r)
		}
	}
	return nil
}

// domain approximates Bottlerocket's DNSDomain: a URL host that is a name,
// not an IP address, and does not start with a dot.
func domain(s string) error {
	if err := singleLine(s); err != nil {
		return err
	}
	if strings.HasPrefix(s, ".") {
		return fmt.Errorf("domain %q starts with a dot", s)
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return fmt.Errorf("%q is an IP address, not a domain", s)
	}
	if i := strings.IndexAny(s, " #%/:<>?@[\\]^|"); i >= 0 {
		return fmt.Errorf("domain %q contains %q, which a host name cannot contain", s, s[i])
	}
	return nil
}

// urlLike approximates Bottlerocket's Url, which provider-id uses: a single
// token without control characters or spaces.
func urlLike(s string) error {
	if err := singleLine(s); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return fmt.Errorf("%q contains white space, which a URL cannot contain", s)
	}
	return nil
}

func oneOf(s string, accepted []string) error {
	for _, a := range accepted {
		if s == a {
			return nil
		}
	}
	return fmt.Errorf("%q is not one of the values Bottlerocket accepts: %s", s, joinSorted(accepted))
}
