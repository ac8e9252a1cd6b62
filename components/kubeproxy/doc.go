// Package kubeproxy is dynconfig's built-in profile for kube-proxy's
// configuration, kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration
// (k8s.io/kube-proxy/config/v1alpha1). It carries its own defaulting and
// validation, written from kube-proxy's rules, because the upstream code
// lives in k8s.io/kubernetes, which a library cannot import.
//
// # What it guarantees
//
//   - Profile.Default fills unset fields with the values kube-proxy's
//     v1alpha1 defaulting uses on Linux, and never replaces a set value.
//     For non-pointer fields (durations, numbers, strings) the zero value
//     means unset, exactly as upstream: iptables.minSyncPeriod: 0s in a file
//     comes back as 1s. Default is idempotent. The one completion of a set
//     value is upstream's too: a healthzBindAddress or metricsBindAddress
//     that is a bare IP gains its default port (10256, 10249), since the
//     port is the unset part; an address that already has a port, or is not
//     an IP at all, is left for Validate.
//   - Profile.Validate does not stop at the first problem: it returns every
//     violation as a field.ErrorList whose paths are the JSON field paths of
//     the v1alpha1 document (iptables.minSyncPeriod, nodePortAddresses[2],
//     featureGates[foo], logging.vmodule[0].filePattern), with field error
//     types callers can branch on: NotSupported for enums, Required for
//     missing values, Forbidden for options behind a disabled feature gate,
//     Invalid for the rest. The order of errors is deterministic.
//   - Profile.Trial reads the trial settings from the ConfigMap's
//     annotations with the shared rules of package components.
//   - No method keeps state or touches anything global; Profile is an
//     empty struct and safe for concurrent use.
//
// # Defaults (Linux)
//
// bindAddress 0.0.0.0; healthzBindAddress 0.0.0.0:10256 and
// metricsBindAddress 127.0.0.1:10249, or [::]:10256 and [::1]:10249 when
// bindAddress is not IPv4; oomScoreAdj -999; iptables syncPeriod 30s,
// minSyncPeriod 1s, masqueradeBit 14, localhostNodePorts true; ipvs
// syncPeriod 30s; nftables syncPeriod 30s, minSyncPeriod 1s, masqueradeBit
// 14; conntrack maxPerCore 32768, min 131072, tcpEstablishedTimeout 24h,
// tcpCloseWaitTimeout 1h; configSyncPeriod 15m; clientConnection contentType
// application/vnd.kubernetes.protobuf, qps 5, burst 10; featureGates an
// empty map; logging as component-base recommends (format text,
// flushFrequency 5s).
//
// What upstream decides from the environment at run time is left unset,
// so that kube-proxy still decides it: hostnameOverride (the node's
// hostname), mode (the platform's default backend), detectLocalMode
// (ClusterCIDR), and nodePortAddresses (which depends on the mode and on
// the node's IPs). Validate accepts these empty values. Feature gates do
// not change any default.
//
// # Validation rules
//
//   - mode: empty, iptables, ipvs or nftables (kernelspace is Windows-only);
//     ipvs needs the KubeProxyIPVS feature gate (deprecated, on by default).
//   - The selected backend's syncPeriod > 0, minSyncPeriod >= 0 and
//     minSyncPeriod <= syncPeriod (an empty mode selects iptables; kube-proxy
//     ignores the other backends' periods, so they are not checked).
//     iptables.masqueradeBit in [0, 31] always (ipvs uses it too);
//     nftables.masqueradeBit in nftables mode.
//   - ipvs mode: tcpTimeout, tcpFinTimeout, udpTimeout >= 0; scheduler empty
//     or a Linux IPVS scheduler (rr wrr lc wlc lblc lblcr dh sh sed nq fo
//     ovf mh twos); each excludeCIDRs entry a CIDR.
//   - bindAddress an IP; metricsBindAddress and (unless empty, which
//     disables it) healthzBindAddress IP:port with a port in 1..65535.
//     IPs and CIDRs are parsed as kube-proxy does: Go's net package rules
//     plus leading zeros.
//   - clientConnection: qps and burst not negative.
//   - conntrack: maxPerCore, min and all four timeouts not negative.
//   - oomScoreAdj in [-1000, 1000]; configSyncPeriod > 0.
//   - detectLocalMode empty, ClusterCIDR, NodeCIDR, BridgeInterface
//     (detectLocal.bridgeInterface required) or InterfaceNamePrefix
//     (detectLocal.interfaceNamePrefix required). In ClusterCIDR mode (or
//     empty, which kube-proxy turns into ClusterCIDR) a non-empty
//     clusterCIDR is one CIDR or an IPv4,IPv6 pair.
//   - nodePortAddresses: each entry a CIDR or one of the keywords primary,
//     localhost and all, in any combination (as the v1alpha1 field of
//     Kubernetes 1.37 documents), each keyword once.
//   - featureGates: each name a gate kube-proxy 1.37 registers (AllAlpha
//     and AllBeta included; the table is the one the kubelet profile uses
//     too, in components/internal/featuregates, because the kube-proxy
//     binary registers the same gates, as test/conformance/kubeproxygates
//     checks), a locked gate only at its value, no gate that 1.37 does not
//     make available yet, and every enabled gate's dependencies enabled
//     (AllAlpha/AllBeta count as component-base counts them).
//   - logging: format text or json (json needs LoggingBetaOptions, on by
//     default); flushFrequency > 0; verbosity fits an int32; vmodule only
//     with text, each filePattern non-empty without '=' or ','; the alpha
//     options splitStream and infoBufferSize need LoggingAlphaOptions
//     (AllAlpha/AllBeta count as component-base counts them).
//   - portRange, unused by kube-proxy, still parses as a port range;
//     showHiddenMetricsForVersion is empty or 1.36, the previous minor
//     version of kube-proxy 1.37, the only value it starts with.
//
// # Proven against upstream
//
// The test module's conformance tests (test/conformance) compare this
// package with kube-proxy's own code on generated configurations:
// Profile.Default equals kube-proxy's v1alpha1 defaulting field for field,
// and Profile.Validate agrees with kube-proxy (its Validate on the
// configuration converted to its internal type, after the platform defaults
// kube-proxy fills in first: an empty mode is iptables, an empty
// detectLocalMode ClusterCIDR) on accept or reject and on the fields at
// fault. The only differences allowed are the two lists below; the test
// knows them and fails when this documentation and the test disagree.
//
// # Checks added beyond upstream
//
// Each item names the fields, then the rule.
//
//   - clientConnection.qps: must not be negative (kube-proxy accepts it and
//     client-go then silently turns off client-side rate limiting); this
//     matches the kubelet's rule for kubeAPIQPS.
//   - portRange: must parse as a port range, although kube-proxy no longer
//     uses the field.
//   - ipvs.scheduler: in ipvs mode, empty or a scheduler of the Linux IPVS
//     code (kube-proxy finds out when it programs the kernel).
//
// # Upstream checks left out
//
// Each item names the fields, then the rule. None: every field kube-proxy's
// own validation checks is checked here.
//
// Also left out: logging, where upstream also rejects a non-text format when
// klog flags were changed on the command line and knows the formats the
// binary registers at run time (only text and json, the formats kube-proxy
// registers, are known here); and Windows: winkernel and windowsRunAsService
// are not validated and the kernelspace mode is rejected.
//
// The codec (strict decoding, apiVersion/kind checks, lenient mode) is the
// merge package's job; this package works on the typed object only.
package kubeproxy
