package conformance

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// gen fills configuration structs with random values, field by field and
// level by level: each field (and each field of a nested struct) is set with
// probability pSet, else left at its zero value. Values come from per-field
// pools of plausible values (the ones people write) and, with probability
// pBad, from pools of values that are wrong in some way the kubelet checks.
// Fields without a pool get a value by kind, so a field added upstream is
// still exercised.
type gen struct {
	r    *rand.Rand
	pSet float64
	pBad float64
	// pools maps a JSON field path ("authentication.webhook.cacheTTL") to
	// its values; see kubeletPools.
	pools map[string]pool
	// skip lists field paths left unset (decided elsewhere, such as
	// featureGates).
	skip map[string]bool
}

// pool holds candidate values of a field, as Go values of the field's type
// (or of its element type for pointers).
type pool struct {
	good, bad []any
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, xs ...T) T { return xs[g.r.Intn(len(xs))] }

// fill sets random fields of the struct v points to.
func (g *gen) fill(v any) {
	g.fillStruct(reflect.ValueOf(v).Elem(), "")
}

func (g *gen) fillStruct(v reflect.Value, prefix string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			if f.Type == reflect.TypeFor[metav1.TypeMeta]() {
				continue
			}
			g.fillStruct(v.Field(i), prefix) // inlined (logging's OutputRoutingOptions)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if g.skip[path] || !g.chance(g.pSet) {
			continue
		}
		g.set(v.Field(i), path)
	}
}

// set gives the field at path a value.
func (g *gen) set(fv reflect.Value, path string) {
	if p, ok := g.pools[path]; ok {
		var x any
		if len(p.bad) > 0 && (len(p.good) == 0 || g.chance(g.pBad)) {
			x = p.bad[g.r.Intn(len(p.bad))]
		} else {
			x = p.good[g.r.Intn(len(p.good))]
		}
		if fn, ok := x.(func(*gen) any); ok {
			x = fn(g)
		}
		assignValue(fv, x, path)
		return
	}
	t := fv.Type()
	switch {
	case t == reflect.TypeFor[metav1.Duration]():
		fv.Set(reflect.ValueOf(metav1.Duration{Duration: g.duration()}))
		return
	case t == reflect.TypeFor[*metav1.Duration]():
		fv.Set(reflect.ValueOf(&metav1.Duration{Duration: g.duration()}))
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		if t.Elem().Kind() == reflect.Struct {
			g.fillStruct(e.Elem(), path)
		} else {
			g.set(e.Elem(), path)
		}
		fv.Set(e)
	case reflect.Struct:
		g.fillStruct(fv, path)
	case reflect.Bool:
		fv.SetBool(g.chance(0.5))
	case reflect.Int32, reflect.Int64, reflect.Int:
		fv.SetInt(pick(g, int64(1), 2, 5, 10, 30, 100, 1000))
	case reflect.Uint32:
		fv.SetUint(pick(g, uint64(0), 1, 2, 4))
	case reflect.Float64:
		fv.SetFloat(pick(g, 0.5, 0.8, 1.0))
	case reflect.String:
		fv.SetString(pick(g, "a", "/var/lib/kubelet/x", "example"))
	default:
		panic(fmt.Sprintf("gen: no pool for %s (%s)", path, t))
	}
}

// assignValue stores x into fv, converting between named types and taking
// the address for pointer fields.
func assignValue(fv reflect.Value, x any, path string) {
	xv := reflect.ValueOf(x)
	t := fv.Type()
	if t.Kind() == reflect.Pointer && xv.Type() != t {
		e := reflect.New(t.Elem())
		assignValue(e.Elem(), x, path)
		fv.Set(e)
		return
	}
	if !xv.Type().ConvertibleTo(t) {
		panic(fmt.Sprintf("gen: pool value %v (%T) does not fit %s (%s)", x, x, path, t))
	}
	fv.Set(xv.Convert(t))
}

func (g *gen) duration() time.Duration {
	return pick(g, time.Second, 10*time.Second, 30*time.Second, time.Minute, 5*time.Minute, 2*time.Hour)
}

func d(s string) metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return metav1.Duration{Duration: v}
}

// anyOf lifts typed values into a pool slice.
func anyOf[T any](xs ...T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// mapOf builds a map value from n random keys (from keys) with values from
// vals; badKeys/badVals are mixed in with probability pBad.
func mapOf(keys, vals, badKeys, badVals []string) func(*gen) any {
	return func(g *gen) any {
		m := map[string]string{}
		n := g.r.Intn(len(keys) + 1)
		for i := 0; i < n; i++ {
			k, v := pick(g, keys...), pick(g, vals...)
			if len(badKeys) > 0 && g.chance(g.pBad/2) {
				k = pick(g, badKeys...)
			}
			if len(badVals) > 0 && g.chance(g.pBad/2) {
				v = pick(g, badVals...)
			}
			m[k] = v
		}
		return m
	}
}

// listOf builds a list of 0..max entries from vals, with bad ones mixed in.
func listOf(max int, vals, bad []string) func(*gen) any {
	return func(g *gen) any {
		out := []string{}
		for n := g.r.Intn(max + 1); n > 0; n-- {
			if len(bad) > 0 && g.chance(g.pBad) {
				out = append(out, pick(g, bad...))
			} else {
				out = append(out, pick(g, vals...))
			}
		}
		return out
	}
}

var (
	evictionSignals = []string{
		"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
		"imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available",
		"allocatableMemory.available",
	}
	evictionValues    = []string{"100Mi", "1Gi", "500Mi", "10%", "5%", "15%", "0%", "100%", "2.5%", "1000"}
	badEvictionValues = []string{"-1Gi", "0", "150%", "-5%", "ten", "", "NaN%", "1Gi%", "5%%"}
	badSignals        = []string{"memory.avaliable", "nodefs.free", "cpu.available", ""}
	graceValues       = []string{"30s", "1m", "1m30s", "0s", "2m"}
	badGraceValues    = []string{"-1s", "soon", "10", ""}
)

// kubeletPools are the plausible values of the KubeletConfiguration fields
// whose value matters to defaulting or validation.
func kubeletPools() map[string]pool {
	i32 := anyOf[int32]
	str := anyOf[string]
	dur := anyOf[metav1.Duration]
	return map[string]pool{
		"enableServer":        {good: anyOf(true, false)},
		"staticPodPath":       {good: str("/etc/kubernetes/manifests", "manifests")},
		"podLogsDir":          {good: str("/var/log/pods", "/var/log/kubelet-pods"), bad: str("var/log/pods", "/var/log/../pods", "/var/log/pöds", "/var/log/pods/")},
		"syncFrequency":       {good: dur(d("1m"), d("30s"), d("10s"))},
		"fileCheckFrequency":  {good: dur(d("20s"), d("5s"))},
		"httpCheckFrequency":  {good: dur(d("20s"), d("1m"))},
		"staticPodURL":        {good: str("https://config.example.com/pods")},
		"staticPodURLHeader":  {good: []any{map[string][]string{"Authorization": {"Bearer x"}}, map[string][]string{"X-A": {"1", "2"}}}},
		"address":             {good: str("0.0.0.0", "10.0.0.5", "::"), bad: str("localhost", "10.0.0.300", "eth0")},
		"port":                {good: i32(10250, 10260, 1, 65535), bad: i32(-1, 65536, 70000)},
		"readOnlyPort":        {good: i32(0, 10255), bad: i32(-1, 65536)},
		"tlsCertFile":         {good: str("/var/lib/kubelet/pki/kubelet.crt")},
		"tlsPrivateKeyFile":   {good: str("/var/lib/kubelet/pki/kubelet.key")},
		"tlsCipherSuites":     {good: []any{listOf(3, []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_RC4_128_SHA"}, []string{"TLS_FAKE_SUITE", "tls_ecdhe_rsa_with_aes_128_gcm_sha256"})}},
		"tlsCurvePreferences": {good: []any{[]int32{23}, []int32{29, 23}, []int32{4588}}, bad: []any{[]int32{0}, []int32{12345}, []int32{23, 23}, []int32{70000}}},
		"tlsMinVersion":       {good: str("VersionTLS12", "VersionTLS13"), bad: str("TLS12", "VersionTLS14", "")},
		"rotateCertificates":  {good: anyOf(true, false)},
		"serverTLSBootstrap":  {good: anyOf(true, false)},

		"authentication.x509.clientCAFile":           {good: str("/etc/kubernetes/pki/ca.crt")},
		"authentication.webhook.enabled":             {good: anyOf(true, false)},
		"authentication.webhook.cacheTTL":            {good: dur(d("2m"), d("10s"))},
		"authentication.anonymous.enabled":           {good: anyOf(true, false)},
		"authorization.mode":                         {good: str("Webhook", "AlwaysAllow"), bad: str("RBAC", "webhook")},
		"authorization.webhook.cacheAuthorizedTTL":   {good: dur(d("5m"), d("1m"))},
		"authorization.webhook.cacheUnauthorizedTTL": {good: dur(d("30s"), d("10s"))},

		"registryPullQPS":                        {good: i32(0, 5, 10), bad: i32(-1)},
		"registryBurst":                          {good: i32(10, 20), bad: i32(-1)},
		"imagePullCredentialsVerificationPolicy": {good: str("NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"), bad: str("Sometimes")},
		"preloadedImagesVerificationAllowlist": {good: []any{listOf(3,
			[]string{"registry.k8s.io/pause", "docker.io/library/*", "quay.io/team/app", "localhost:5000/x", "Registry.Example.com/app"},
			[]string{"*", "quay.io/*/app", "registry.k8s.io/pause:3.9", " quay.io/a", "UPPER/app", "a//b", "registry.k8s.io/pause@sha256:" + strings.Repeat("a", 64), "/*"})}},
		"eventRecordQPS":                            {good: i32(0, 50, 5), bad: i32(-1)},
		"eventBurst":                                {good: i32(100, 10), bad: i32(-10)},
		"enableDebuggingHandlers":                   {good: anyOf(true, false)},
		"healthzPort":                               {good: i32(0, 10248, 20000), bad: i32(-1, 65536)},
		"healthzBindAddress":                        {good: str("127.0.0.1", "0.0.0.0")},
		"oomScoreAdj":                               {good: i32(-999, 0, 1000), bad: i32(-1001, 2000)},
		"clusterDomain":                             {good: str("cluster.local")},
		"clusterDNS":                                {good: []any{[]string{"10.96.0.10"}, []string{"10.96.0.10", "fd00::a"}}, bad: []any{[]string{"kube-dns"}}},
		"streamingConnectionIdleTimeout":            {good: dur(d("4h"), d("5m"))},
		"nodeStatusUpdateFrequency":                 {good: dur(d("10s"), d("20s"), d("1m"))},
		"nodeStatusReportFrequency":                 {good: dur(d("5m"), d("1m"))},
		"nodeLeaseDurationSeconds":                  {good: i32(40, 10), bad: i32(-1)},
		"imageMinimumGCAge":                         {good: dur(d("2m"), d("10m")), bad: dur(d("-1m"))},
		"imageMaximumGCAge":                         {good: dur(d("0s"), d("24h"), d("1m")), bad: dur(d("-1h"))},
		"imageGCHighThresholdPercent":               {good: i32(85, 90, 100, 50), bad: i32(-1, 101)},
		"imageGCLowThresholdPercent":                {good: i32(80, 70, 0, 50), bad: i32(-5, 120)},
		"volumeStatsAggPeriod":                      {good: dur(d("1m"), d("0s"))},
		"kubeletCgroups":                            {good: str("/system.slice/kubelet.service")},
		"systemCgroups":                             {good: str("/system.slice")},
		"cgroupRoot":                                {good: str("/", "/kubepods")},
		"cgroupsPerQOS":                             {good: anyOf(true, false)},
		"cgroupDriver":                              {good: str("systemd", "cgroupfs"), bad: str("Systemd", "docker")},
		"cpuManagerPolicy":                          {good: str("none", "static"), bad: str("None", "dynamic")},
		"singleProcessOOMKill":                      {good: anyOf(true, false)},
		"cpuManagerPolicyOptions":                   {good: []any{map[string]string{"full-pcpus-only": "true"}}},
		"cpuManagerReconcilePeriod":                 {good: dur(d("10s"), d("5s"))},
		"memoryManagerPolicy":                       {good: str("None", "Static"), bad: str("none", "static")},
		"topologyManagerPolicy":                     {good: str("none", "best-effort", "restricted", "single-numa-node"), bad: str("strict")},
		"topologyManagerScope":                      {good: str("container", "pod"), bad: str("node")},
		"topologyManagerPolicyOptions":              {good: []any{map[string]string{"prefer-closest-numa-nodes": "true"}}},
		"qosReserved":                               {good: []any{mapOf([]string{"memory"}, []string{"50%", "0%", "100%"}, []string{"cpu"}, []string{"50", "150%", "x%", "-1%", "12.5%"})}},
		"runtimeRequestTimeout":                     {good: dur(d("2m"), d("10m"))},
		"hairpinMode":                               {good: str("promiscuous-bridge", "hairpin-veth", "none"), bad: str("veth")},
		"maxPods":                                   {good: i32(110, 250, 10), bad: i32(-1)},
		"podCIDR":                                   {good: str("10.244.0.0/24"), bad: str("10.244.0.0")},
		"podPidsLimit":                              {good: anyOf[int64](-1, 1024, 4096, -5, 0)},
		"resolvConf":                                {good: str("/etc/resolv.conf", "/run/systemd/resolve/resolv.conf", "")},
		"runOnce":                                   {good: anyOf(false), bad: anyOf(true)},
		"cpuCFSQuota":                               {good: anyOf(true, false)},
		"cpuCFSQuotaPeriod":                         {good: dur(d("100ms"), d("50ms"), d("1s")), bad: dur(d("0s"), d("2s"), d("500us"))},
		"nodeStatusMaxImages":                       {good: i32(50, -1, 0), bad: i32(-2)},
		"maxOpenFiles":                              {good: anyOf[int64](1000000, 65536), bad: anyOf[int64](-1)},
		"contentType":                               {good: str("application/vnd.kubernetes.protobuf", "application/json")},
		"kubeAPIQPS":                                {good: i32(50, 0, 100), bad: i32(-1)},
		"kubeAPIBurst":                              {good: i32(100, 200), bad: i32(-1)},
		"serializeImagePulls":                       {good: anyOf(true, false)},
		"maxParallelImagePulls":                     {good: i32(1, 2, 5), bad: i32(0, -1)},
		"evictionHard":                              {good: []any{mapOf(evictionSignals, evictionValues, badSignals, badEvictionValues), map[string]string{}}},
		"evictionSoft":                              {good: []any{mapOf(evictionSignals, evictionValues, badSignals, badEvictionValues)}},
		"evictionSoftGracePeriod":                   {good: []any{mapOf(evictionSignals, graceValues, badSignals, badGraceValues)}},
		"evictionPressureTransitionPeriod":          {good: dur(d("5m"), d("30s"))},
		"evictionMaxPodGracePeriod":                 {good: i32(0, 30, 60)},
		"evictionMinimumReclaim":                    {good: []any{mapOf(evictionSignals, []string{"500Mi", "1Gi", "5%", "0"}, badSignals, []string{"0%", "-1Gi", "x", "-2%"})}},
		"mergeDefaultEvictionSettings":              {good: anyOf(true, false)},
		"podsPerCore":                               {good: i32(0, 10), bad: i32(-1)},
		"enableControllerAttachDetach":              {good: anyOf(true, false)},
		"protectKernelDefaults":                     {good: anyOf(true, false)},
		"makeIPTablesUtilChains":                    {good: anyOf(true, false)},
		"iptablesMasqueradeBit":                     {good: i32(14, 0, 31), bad: i32(-1, 32)},
		"iptablesDropBit":                           {good: i32(15, 0, 31), bad: i32(-1, 40)},
		"failSwapOn":                                {good: anyOf(true, false)},
		"memorySwap.swapBehavior":                   {good: str("NoSwap", "LimitedSwap", ""), bad: str("UnlimitedSwap")},
		"containerLogMaxSize":                       {good: str("10Mi", "50Mi", "1Gi"), bad: str("ten", "-1Mi")},
		"containerLogMaxFiles":                      {good: i32(5, 2, 10), bad: i32(1, 0)},
		"containerLogMaxWorkers":                    {good: i32(1, 4), bad: i32(0, -1)},
		"containerLogMonitorInterval":               {good: dur(d("10s"), d("3s"), d("1m")), bad: dur(d("1s"), d("0s"))},
		"configMapAndSecretChangeDetectionStrategy": {good: str("Watch", "Cache", "Get"), bad: str("Poll")},
		"systemReserved":                            {good: []any{mapOf([]string{"cpu", "memory", "ephemeral-storage", "pid"}, []string{"100m", "1Gi", "500Mi", "1000"}, []string{"gpu", "hugepages-2Mi"}, []string{"-1", "lots"})}},
		"kubeReserved":                              {good: []any{mapOf([]string{"cpu", "memory", "ephemeral-storage", "pid"}, []string{"200m", "512Mi", "1Gi"}, []string{"storage"}, []string{"-100m", "1x"})}},
		"reservedSystemCPUs":                        {good: str("0", "0-1", "0,2"), bad: str("0-", "a", "3-1")},
		"showHiddenMetricsForVersion":               {good: str("1.36", ""), bad: str("1.35", "1.37", "v1.36", "x")},
		"systemReservedCgroup":                      {good: str("/system.slice")},
		"kubeReservedCgroup":                        {good: str("/kube.slice")},
		"enforceNodeAllocatable": {good: []any{[]string{"pods"}, []string{"pods", "system-reserved"}, []string{"pods", "kube-reserved-compressible"}, []string{"none"}, []string{}},
			bad: []any{[]string{"pods", "pods"}, []string{"none", "pods"}, []string{"system-reserved", "system-reserved-compressible"}, []string{"kube-reserved", "kube-reserved-compressible"}, []string{"memory"}}},
		"allowedUnsafeSysctls": {good: []any{[]string{"net.core.somaxconn", "kernel.msg*"}}},
		"defaultPodSysctls": {good: []any{mapOf([]string{"net.ipv4.ip_unprivileged_port_start", "net.core.somaxconn", "net/ipv4/ping_group_range", "kernel.shm_rmid_forced"}, []string{"0", "1024"},
			[]string{"vm.swappiness", "Net.Core", "net..core", "net.ipv4.ip_unprivileged_port_start/"}, nil)}},
		"volumePluginDir":         {good: str("/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")},
		"providerID":              {good: str("aws:///us-east-1a/i-0123")},
		"kernelMemcgNotification": {good: anyOf(true, false)},

		"logging.format":                      {good: str("text", "json", ""), bad: str("xml")},
		"logging.flushFrequency":              {good: []any{logsapi.TimeOrMetaDuration{Duration: d("5s")}, logsapi.TimeOrMetaDuration{Duration: d("1s"), SerializeAsString: true}}, bad: []any{logsapi.TimeOrMetaDuration{Duration: d("-1s")}}},
		"logging.verbosity":                   {good: anyOf[uint32](0, 2, 4), bad: anyOf[uint32](math.MaxUint32)},
		"logging.vmodule":                     {good: []any{logsapi.VModuleConfiguration{{FilePattern: "kubelet*", Verbosity: 4}}}, bad: []any{logsapi.VModuleConfiguration{{FilePattern: "", Verbosity: 1}}, logsapi.VModuleConfiguration{{FilePattern: "a=b", Verbosity: 1}}}},
		"logging.options.text.splitStream":    {good: anyOf(false), bad: anyOf(true)},
		"logging.options.json.splitStream":    {good: anyOf(false), bad: anyOf(true)},
		"logging.options.text.infoBufferSize": {good: []any{resource.QuantityValue{}}, bad: []any{resource.QuantityValue{Quantity: resource.MustParse("64Ki")}}},
		"logging.options.json.infoBufferSize": {good: []any{resource.QuantityValue{}}, bad: []any{resource.QuantityValue{Quantity: resource.MustParse("1Mi")}}},

		"enableSystemLogHandler":          {good: anyOf(true, false)},
		"enableSystemLogQuery":            {good: anyOf(false, true)},
		"shutdownGracePeriod":             {good: dur(d("30s"), d("0s"), d("1m")), bad: dur(d("500ms"), d("-1s"))},
		"shutdownGracePeriodCriticalPods": {good: dur(d("10s"), d("0s")), bad: dur(d("2h"), d("100ms"))},
		"shutdownGracePeriodByPodPriority": {good: []any{
			[]kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 100000, ShutdownGracePeriodSeconds: 10}, {Priority: 0, ShutdownGracePeriodSeconds: 60}},
		}, bad: []any{
			[]kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 1, ShutdownGracePeriodSeconds: -1}},
			[]kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 1, ShutdownGracePeriodSeconds: 5}, {Priority: 1, ShutdownGracePeriodSeconds: 6}},
		}},
		"crashLoopBackOff.maxContainerRestartPeriod": {good: dur(d("300s"), d("1s"), d("1m")), bad: dur(d("500ms"), d("10m"), d("0s"))},
		"reservedMemory": {good: []any{
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi")}}},
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("500Mi"), "hugepages-2Mi": resource.MustParse("10Mi")}}, {NumaNode: 1, Limits: corev1.ResourceList{"memory": resource.MustParse("1.5u")}}},
		}, bad: []any{
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("0")}}},
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}},
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi")}}, {NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("2Gi")}}},
			[]kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("-1Gi")}}},
		}},
		"enableProfilingHandler":  {good: anyOf(true, false)},
		"enableDebugFlagsHandler": {good: anyOf(true, false)},
		"seccompDefault":          {good: anyOf(true, false)},
		"memoryThrottlingFactor":  {good: anyOf(0.9, 0.8, 1.0), bad: anyOf(0.0, 1.5, -0.1, math.NaN())},
		"memoryReservationPolicy": {good: str("None", "TieredReservation"), bad: str("Tiered")},
		"registerWithTaints": {good: []any{
			[]corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
		}, bad: []any{
			[]corev1.Taint{{Key: "bad key", Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Taint{{Key: "k", Value: "v v", Effect: corev1.TaintEffectNoSchedule}},
			[]corev1.Taint{{Key: "k", Effect: "Sometimes"}},
			[]corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: time.Unix(1, 0)}}},
		}},
		"registerNode":                   {good: anyOf(true, false)},
		"tracing.endpoint":               {good: str("localhost:4317", "otel.example.com:4317"), bad: str("", "http://[::1")},
		"tracing.samplingRatePerMillion": {good: i32(0, 100, 1000000), bad: i32(-1, 1000001)},
		"localStorageCapacityIsolation":  {good: anyOf(true, false)},
		"containerRuntimeEndpoint":       {good: str("unix:///run/containerd/containerd.sock", "unix:///var/run/crio/crio.sock")},
		"imageServiceEndpoint":           {good: str("unix:///run/containerd/containerd.sock")},
		"failCgroupV1":                   {good: anyOf(true, false)},
		"userNamespaces.idsPerPod":       {good: anyOf[int64](65536, 131072, 1<<31), bad: anyOf[int64](0, -65536, 1000, 65537, 1<<32)},
	}
}
