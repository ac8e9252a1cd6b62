package bottlerocket

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// settingsPrefix is the Bottlerocket API path every rendered setting lives under.
const settingsPrefix = "settings.kubernetes."

// FieldMapping pairs a KubeletConfiguration field with the Bottlerocket
// setting Render writes it to.
type FieldMapping struct {
	// Field is the field's top-level JSON name, e.g. "maxPods".
	Field string
	// Setting is the full Bottlerocket setting, e.g. "settings.kubernetes.max-pods".
	Setting string
	// EmptyIsUnset is true for a map or list field whose explicitly empty
	// value (non-nil, no entries) the kubelet reads the same as the field's
	// absence, which is what Bottlerocket gives it for an unset setting:
	// Render writes nothing for it. An explicitly empty value of any other
	// map or list field is an *InvalidValueError.
	EmptyIsUnset bool
}

// SupportedFields returns every KubeletConfiguration field Render can
// express, sorted by field name. Any other field that is set makes Render
// fail with an *UnsupportedFieldsError. The slice is the caller's to keep.
func SupportedFields() []FieldMapping {
	ms := mappings()
	out := make([]FieldMapping, len(ms))
	for i, m := range ms {
		out[i] = FieldMapping{Field: m.field, Setting: settingsPrefix + m.setting, EmptyIsUnset: emptyIsUnset(m.field)}
	}
	return out
}

// Render translates the fields the user set in cfg into Bottlerocket's
// settings.kubernetes TOML, for use in Bottlerocket user data.
//
// cfg must be the configuration as the user wrote it, not a defaulted one: a
// field counts as set when it is non-zero (a non-nil pointer, map or list,
// a non-zero scalar or struct), and only set fields are rendered, so
// Bottlerocket keeps its own defaults for the rest. A map or list that is
// not nil but empty is set, to nothing: it renders to nothing when
// FieldMapping.EmptyIsUnset, and is an error otherwise. TypeMeta is
// ignored.
//
// The output holds a [settings.kubernetes] table with one key per set field,
// sorted, followed by one subtable per map setting (eviction-hard,
// kube-reserved, ...), sorted, with their keys sorted. Equal inputs give
// equal bytes.
//
// Render reports every problem at once. Set fields without a Bottlerocket
// setting are collected in one *UnsupportedFieldsError; each value
// Bottlerocket would refuse is an *InvalidValueError. One problem is returned
// as is; several are joined with errors.Join, unsupported fields first, so
// errors.As finds each of them. Render never modifies cfg.
func Render(cfg *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	if cfg == nil {
		return nil, errors.New("bottlerocket: nil KubeletConfiguration")
	}
	ms := mappings()
	r := &renderer{}
	entries := make(map[string]value, len(ms))
	mapped := make(map[string]bool, len(ms))
	for _, m := range ms {
		mapped[m.field] = true
		r.cur = m
		if v := m.render(r, cfg); v != nil {
			entries[m.setting] = v
		}
	}

	var errs []error
	if unsupported := unsupportedFields(cfg, mapped); len(unsupported) > 0 {
		errs = append(errs, &UnsupportedFieldsError{Fields: unsupported})
	}
	errs = append(errs, r.errs...)
	switch len(errs) {
	case 0:
	case 1:
		return nil, errs[0]
	default:
		return nil, errors.Join(errs...)
	}

	out, err := encodeTable([]string{"settings", "kubernetes"}, entries)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: encoding settings.kubernetes: %w", err)
	}
	return out, nil
}

// mapping renders one KubeletConfiguration field. render returns nil when the
// field is unset (or, like an all-false cpuManagerPolicyOptions, renders to
// nothing) and records value errors on the renderer.
type mapping struct {
	field   string // top-level JSON name in KubeletConfiguration
	setting string // key under settings.kubernetes
	render  func(r *renderer, c *kubeletv1beta1.KubeletConfiguration) value
}

// mappings is the translation table, sorted by field name. It is built per
// call so the package holds no mutable state.
func mappings() []mapping {
	type kc = kubeletv1beta1.KubeletConfiguration
	return []mapping{
		{"allowedUnsafeSysctls", "allowed-unsafe-sysctls", func(r *renderer, c *kc) value {
			return r.singleLineList(c.AllowedUnsafeSysctls)
		}},
		{"clusterDNS", "cluster-dns-ip", func(r *renderer, c *kc) value {
			if c.ClusterDNS != nil && len(c.ClusterDNS) == 0 {
				r.invalid(r.cur.field, "[]", "an empty list gives the kubelet no cluster DNS, "+
					"but Bottlerocket treats an empty list as unset, and an unset cluster-dns-ip is filled in with the cluster's DNS address")
				return nil
			}
			return r.clusterDNS(c.ClusterDNS)
		}},
		{"clusterDomain", "cluster-domain", func(r *renderer, c *kc) value {
			return r.checkedString(c.ClusterDomain, domain)
		}},
		{"containerLogMaxFiles", "container-log-max-files", func(r *renderer, c *kc) value {
			return int32Ptr(c.ContainerLogMaxFiles)
		}},
		{"containerLogMaxSize", "container-log-max-size", func(r *renderer, c *kc) value {
			return r.quantity(c.ContainerLogMaxSize)
		}},
		{"cpuCFSQuota", "cpu-cfs-quota-enforced", func(r *renderer, c *kc) value { return boolPtr(c.CPUCFSQuota) }},
		{"cpuManagerPolicy", "cpu-manager-policy", func(r *renderer, c *kc) value {
			return r.enum(c.CPUManagerPolicy, "none", "static")
		}},
		{"cpuManagerPolicyOptions", "cpu-manager-policy-options", func(r *renderer, c *kc) value {
			return r.cpuManagerPolicyOptions(c.CPUManagerPolicyOptions)
		}},
		{"cpuManagerReconcilePeriod", "cpu-manager-reconcile-period", func(r *renderer, c *kc) value {
			return r.duration(c.CPUManagerReconcilePeriod.Duration)
		}},
		{"eventBurst", "event-burst", func(r *renderer, c *kc) value { return int32Value(c.EventBurst) }},
		{"eventRecordQPS", "event-qps", func(r *renderer, c *kc) value { return int32Ptr(c.EventRecordQPS) }},
		{"evictionHard", "eviction-hard", func(r *renderer, c *kc) value {
			if c.EvictionHard != nil && len(c.EvictionHard) == 0 {
				r.invalid(r.cur.field, "{}", "an empty map would disable hard eviction in the kubelet, "+
					"but Bottlerocket treats an empty table as unset and the kubelet's default thresholds would apply")
				return nil
			}
			return r.signalTable(c.EvictionHard, fitThreshold)
		}},
		{"evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", func(r *renderer, c *kc) value {
			return r.nonNegative(int64(c.EvictionMaxPodGracePeriod))
		}},
		{"evictionSoft", "eviction-soft", func(r *renderer, c *kc) value {
			return r.signalTable(c.EvictionSoft, fitThreshold)
		}},
		{"evictionSoftGracePeriod", "eviction-soft-grace-period", func(r *renderer, c *kc) value {
			return r.signalTable(c.EvictionSoftGracePeriod, fitDurationString)
		}},
		{"imageGCHighThresholdPercent", "image-gc-high-threshold-percent", func(r *renderer, c *kc) value {
			return r.percent(c.ImageGCHighThresholdPercent)
		}},
		{"imageGCLowThresholdPercent", "image-gc-low-threshold-percent", func(r *renderer, c *kc) value {
			return r.percent(c.ImageGCLowThresholdPercent)
		}},
		{"kubeAPIBurst", "kube-api-burst", func(r *renderer, c *kc) value { return int32Value(c.KubeAPIBurst) }},
		{"kubeAPIQPS", "kube-api-qps", func(r *renderer, c *kc) value { return int32Ptr(c.KubeAPIQPS) }},
		{"kubeReserved", "kube-reserved", func(r *renderer, c *kc) value {
			if c.KubeReserved != nil && len(c.KubeReserved) == 0 {
				r.invalid(r.cur.field, "{}", "an empty map reserves nothing for Kubernetes components, "+
					"but Bottlerocket always reserves cpu, memory and ephemeral-storage (its defaults for the resources the table leaves out)")
				return nil
			}
			return r.reserved(c.KubeReserved)
		}},
		{"maxPods", "max-pods", func(r *renderer, c *kc) value { return r.nonNegative(int64(c.MaxPods)) }},
		{"memoryManagerPolicy", "memory-manager-policy", func(r *renderer, c *kc) value {
			return r.enum(c.MemoryManagerPolicy, "None", "Static")
		}},
		{"podPidsLimit", "pod-pids-limit", func(r *renderer, c *kc) value {
			if c.PodPidsLimit == nil {
				return nil
			}
			return tomlInt(*c.PodPidsLimit)
		}},
		{"providerID", "provider-id", func(r *renderer, c *kc) value { return r.checkedString(c.ProviderID, urlLike) }},
		{"registryBurst", "registry-burst", func(r *renderer, c *kc) value { return int32Value(c.RegistryBurst) }},
		{"registryPullQPS", "registry-qps", func(r *renderer, c *kc) value { return int32Ptr(c.RegistryPullQPS) }},
		{"shutdownGracePeriod", "shutdown-grace-period", func(r *renderer, c *kc) value {
			return r.duration(c.ShutdownGracePeriod.Duration)
		}},
		{"shutdownGracePeriodCriticalPods", "shutdown-grace-period-for-critical-pods", func(r *renderer, c *kc) value {
			return r.duration(c.ShutdownGracePeriodCriticalPods.Duration)
		}},
		{"systemReserved", "system-reserved", func(r *renderer, c *kc) value { return r.reserved(c.SystemReserved) }},
		{"topologyManagerPolicy", "topology-manager-policy", func(r *renderer, c *kc) value {
			return r.enum(c.TopologyManagerPolicy, "none", "restricted", "best-effort", "single-numa-node")
		}},
		{"topologyManagerScope", "topology-manager-scope", func(r *renderer, c *kc) value {
			return r.enum(c.TopologyManagerScope, "container", "pod")
		}},
	}
}

// emptyIsUnset says whether an explicitly empty value of field means to
// the kubelet what Bottlerocket gives it when the setting is unset:
// Bottlerocket's kubelet configuration template writes these fields only
// when their setting has entries, and the kubelet's default for each is
// empty (no unsafe sysctls, no CPU manager options, no soft eviction, no
// system reservation).
func emptyIsUnset(field string) bool {
	switch field {
	case "allowedUnsafeSysctls", "cpuManagerPolicyOptions", "evictionSoft", "evictionSoftGracePeriod", "systemReserved":
		return true
	}
	return false
}

// renderer collects the value errors of one Render call and knows which
// mapping is being rendered, so errors name its field and setting.
type renderer struct {
	cur  mapping
	errs []error
}

func (r *renderer) invalid(path, val, reason string) {
	r.errs = append(r.errs, &InvalidValueError{
		Field:   path,
		Setting: settingsPrefix + r.cur.setting,
		Value:   val,
		Reason:  reason,
	})
}

func int32Value(v int32) value {
	if v == 0 {
		return nil
	}
	return tomlInt(v)
}

func int32Ptr(p *int32) value {
	if p == nil {
		return nil
	}
	return tomlInt(*p)
}

func boolPtr(p *bool) value {
	if p == nil {
		return nil
	}
	return tomlBool(*p)
}

// nonNegative is for settings Bottlerocket types as unsigned or
// NonNegativeInteger. Zero means unset for these non-pointer fields.
func (r *renderer) nonNegative(v int64) value {
	if v == 0 {
		return nil
	}
	if v < 0 {
		r.invalid(r.cur.field, strconv.FormatInt(v, 10), "Bottlerocket accepts only values of zero or more")
		return nil
	}
	return tomlInt(v)
}

// percent is for Bottlerocket's IntegerPercent, 0 to 100 inclusive.
func (r *renderer) percent(p *int32) value {
	if p == nil {
		return nil
	}
	if *p < 0 || *p > 100 {
		r.invalid(r.cur.field, strconv.Itoa(int(*p)), "Bottlerocket accepts 0 to 100 inclusive")
		return nil
	}
	return tomlInt(*p)
}

func (r *renderer) enum(s string, accepted ...string) value {
	if s == "" {
		return nil
	}
	if err := oneOf(s, accepted); err != nil {
		r.invalid(r.cur.field, s, err.Error())
		return nil
	}
	return tomlString(s)
}

func (r *renderer) checkedString(s string, check func(string) error) value {
	if s == "" {
		return nil
	}
	if err := check(s); err != nil {
		r.invalid(r.cur.field, s, err.Error())
		return nil
	}
	return tomlString(s)
}

func (r *renderer) quantity(s string) value {
	if s == "" {
		return nil
	}
	q, err := fitQuantity(s)
	if err != nil {
		r.invalid(r.cur.field, s, err.Error())
		return nil
	}
	return tomlString(q)
}

func (r *renderer) duration(d time.Duration) value {
	if d == 0 {
		return nil
	}
	s, err := fitDuration(d)
	if err != nil {
		r.invalid(r.cur.field, d.String(), err.Error())
		return nil
	}
	return tomlString(s)
}

func (r *renderer) singleLineList(items []string) value {
	if len(items) == 0 {
		return nil
	}
	out := make(tomlStrings, 0, len(items))
	for i, s := range items {
		if err := singleLine(s); err != nil {
			r.invalid(field.NewPath(r.cur.field).Index(i).String(), s, err.Error())
			continue
		}
		out = append(out, s)
	}
	return out
}

// clusterDNS writes one address as a plain string, which every Bottlerocket
// release with this setting accepts, and several as a list.
func (r *renderer) clusterDNS(ips []string) value {
	if len(ips) == 0 {
		return nil
	}
	out := make(tomlStrings, 0, len(ips))
	for i, s := range ips {
		ip, err := ipAddress(s)
		if err != nil {
			r.invalid(field.NewPath(r.cur.field).Index(i).String(), s, err.Error())
			continue
		}
		out = append(out, ip)
	}
	if len(ips) == 1 && len(out) == 1 {
		return tomlString(out[0])
	}
	return out
}

// cpuManagerPolicyOptions turns the kubelet's option map into Bottlerocket's
// list of enabled options. The kubelet reads each value as a boolean; an
// option set to false is the kubelet's default, so it is left out.
func (r *renderer) cpuManagerPolicyOptions(opts map[string]string) value {
	if len(opts) == 0 {
		return nil
	}
	accepted := []string{"full-pcpus-only"}
	var out tomlStrings
	for _, k := range sortedKeys(opts) {
		path := field.NewPath(r.cur.field).Key(k).String()
		if !slices.Contains(accepted, k) {
			r.invalid(path, k, fmt.Sprintf("option %q is not one Bottlerocket accepts: %s", k, joinSorted(accepted)))
			continue
		}
		on, err := strconv.ParseBool(opts[k])
		if err != nil {
			r.invalid(path, opts[k], fmt.Sprintf("%q is not a boolean", opts[k]))
			continue
		}
		if on {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// signalTable renders an eviction map keyed by signal, checking each value
// with conv.
func (r *renderer) signalTable(m map[string]string, conv func(string) (string, error)) value {
	if len(m) == 0 {
		return nil
	}
	return r.table(m, evictionSignals(), "eviction signal", conv)
}

func (r *renderer) reserved(m map[string]string) value {
	if len(m) == 0 {
		return nil
	}
	return r.table(m, reservedResources(), "resource", fitQuantity)
}

func (r *renderer) table(m map[string]string, keys []string, what string, conv func(string) (string, error)) value {
	out := make(tomlTable, len(m))
	for _, k := range sortedKeys(m) {
		path := field.NewPath(r.cur.field).Key(k).String()
		if !slices.Contains(keys, k) {
			r.invalid(path, k, fmt.Sprintf("%s %q is not one Bottlerocket accepts: %s", what, k, joinSorted(keys)))
			continue
		}
		v, err := conv(m[k])
		if err != nil {
			r.invalid(path, m[k], err.Error())
			continue
		}
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// unsupportedFields returns the sorted JSON names of the set fields of cfg
// that have no mapping. TypeMeta (embedded) is skipped.
func unsupportedFields(cfg *kubeletv1beta1.KubeletConfiguration, mapped map[string]bool) []string {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name := jsonName(f)
		if name == "" || mapped[name] || !isSet(v.Field(i)) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// jsonName returns the name encoding/json uses for f, or "" for a field
// json ignores.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

// isSet reports whether v carries a value the user wrote: a non-nil pointer
// or interface (even to a zero value, as with cpuCFSQuota: false), a
// non-nil map or slice (even an empty one: tlsCipherSuites: [] says "Go's
// default suites", not "Bottlerocket's"), a struct with any field set, or a
// non-zero scalar.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil()
	case reflect.Map, reflect.Slice:
		return !v.IsNil()
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if isSet(v.Field(i)) {
				return true
			}
		}
		return false
	default:
		return !v.IsZero()
	}
}
