package bottlerocket

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dynconfig/dynconfig/internal/kubeletdoc"

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
// ignored. A field that is not a pointer, map or list and is set to its zero
// value (maxPods: 0, serverTLSBootstrap: false) cannot be told from an unset
// one in cfg; RenderDocument, which reads the user's document, can.
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
	return render(cfg, nil)
}

// RenderDocument is Render for a KubeletConfiguration document (YAML or
// JSON) that holds exactly the fields the user set, such as
// provision.Result.UserDocument. Unlike a typed configuration, the document
// says which fields are set to their zero value, and such a field is never
// dropped: a supported one is rendered with its zero (serverTLSBootstrap:
// false is server-tls-bootstrap = false, which turns off what Bottlerocket
// turns on by default) or is an *InvalidValueError saying why Bottlerocket
// cannot take it (maxPods: 0; "" for a string setting), and an unsupported
// one is in the *UnsupportedFieldsError (readOnlyPort: 0). See the package
// doc for the rule of each field.
//
// The document is decoded strictly (unknown and duplicate fields and
// values of the wrong type are errors) but not validated. apiVersion and
// kind, when present, must be kubelet.config.k8s.io/v1beta1
// KubeletConfiguration. null as a field's whole value means "not set"; null
// as a map value or list element is an error naming its path. Decoding
// errors come back alone, before anything is rendered.
func RenderDocument(doc []byte) ([]byte, error) {
	cfg, j, err := kubeletdoc.DecodeStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("bottlerocket: document: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(j, &top); err != nil {
		return nil, fmt.Errorf("bottlerocket: document: %w", err)
	}
	explicit := make(map[string]bool, len(top))
	cv := reflect.ValueOf(cfg).Elem()
	index := fieldIndex(cv.Type())
	var nulls []error
	for _, k := range sortedKeys(top) {
		raw := bytes.TrimSpace(top[k])
		if k == "apiVersion" || k == "kind" || string(raw) == "null" {
			continue // null: not set
		}
		i, ok := index[k]
		if !ok {
			continue // the strict decoding refused unknown fields
		}
		// An object for a struct field (authentication, logging) sets
		// something when it holds a value at some depth, zero values
		// included; {} or only nulls set nothing.
		if ft := cv.Field(i); isPlainStruct(ft.Type()) && !isSet(ft) && !holdsScalar(raw) {
			continue
		}
		explicit[k] = true
		nulls = append(nulls, nullEntries(k, raw)...)
	}
	if len(nulls) > 0 {
		return nil, errors.Join(nulls...)
	}
	return render(cfg, explicit)
}

// isPlainStruct says whether t (or what it points to) is a struct whose JSON
// form is its fields, not a value of its own (metav1.Duration).
func isPlainStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	pt := reflect.PointerTo(t)
	return !pt.Implements(reflect.TypeFor[json.Unmarshaler]()) && !pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// holdsScalar says whether the JSON value raw has a number, string or bool
// anywhere in it.
func holdsScalar(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case nil:
			return false
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
			return false
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
			return false
		}
		return true
	}
	return walk(v)
}

// nullEntries returns an error for every null map value or list element
// directly in raw, the value of the top-level field name. Decoded, such a
// null would be an empty string, or leave the key out, and neither is what
// the document says (see package provision).
func nullEntries(name string, raw json.RawMessage) []error {
	var errs []error
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		for _, k := range sortedKeys(m) {
			if string(bytes.TrimSpace(m[k])) == "null" {
				errs = append(errs, fmt.Errorf("bottlerocket: document: %s: %s", field.NewPath(name).Key(k), kubeletdoc.NullMapValue))
			}
		}
	case len(raw) > 0 && raw[0] == '[':
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil {
			return nil
		}
		for i, e := range l {
			if string(bytes.TrimSpace(e)) == "null" {
				errs = append(errs, fmt.Errorf("bottlerocket: document: %s: %s", field.NewPath(name).Index(i), kubeletdoc.NullListElement))
			}
		}
	}
	return errs
}

// render renders cfg. explicit, when not nil, holds the top-level JSON names
// of the fields the user's document sets (null aside), zero values
// included; nil means cfg is all there is, and a zero field is unset.
func render(cfg *kubeletv1beta1.KubeletConfiguration, explicit map[string]bool) ([]byte, error) {
	ms := mappings()
	r := &renderer{}
	entries := make(map[string]value, len(ms))
	mapped := make(map[string]bool, len(ms))
	cv := reflect.ValueOf(cfg).Elem()
	var index map[string]int
	if explicit != nil {
		index = fieldIndex(cv.Type())
	}
	for _, m := range ms {
		mapped[m.field] = true
		r.cur = m
		v := m.render(r, cfg)
		if v == nil && m.zero != nil && explicit[m.field] && cv.Field(index[m.field]).IsZero() {
			// Set to its zero value: rendered as such, or refused.
			v = m.zero(r)
		}
		if v != nil {
			entries[m.setting] = v
		}
	}

	var errs []error
	if unsupported := unsupportedFields(cfg, mapped, explicit); len(unsupported) > 0 {
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
	// zero renders the field when a document sets it to its Go zero value,
	// which render cannot tell from unset (a non-pointer scalar or
	// duration), or records why Bottlerocket cannot take it. Nil for
	// pointer, map and list fields, whose explicit zero or empty value is
	// not their Go zero value and goes through render.
	zero func(r *renderer) value
}

// mappings is the translation table, sorted by field name. It is built per
// call so the package holds no mutable state.
func mappings() []mapping {
	type kc = kubeletv1beta1.KubeletConfiguration
	return []mapping{
		{field: "allowedUnsafeSysctls", setting: "allowed-unsafe-sysctls", render: func(r *renderer, c *kc) value {
			return r.singleLineList(c.AllowedUnsafeSysctls)
		}},
		{field: "clusterDNS", setting: "cluster-dns-ip", render: func(r *renderer, c *kc) value {
			if c.ClusterDNS != nil && len(c.ClusterDNS) == 0 {
				r.invalid(r.cur.field, "[]", "an empty list gives the kubelet no cluster DNS, "+
					"but Bottlerocket treats an empty list as unset, and an unset cluster-dns-ip is filled in with the cluster's DNS address")
				return nil
			}
			return r.clusterDNS(c.ClusterDNS)
		}},
		{field: "clusterDomain", setting: "cluster-domain", render: func(r *renderer, c *kc) value {
			return r.checkedString(c.ClusterDomain, domain)
		}, zero: refuseZero(`""`, "an empty domain gives the kubelet no cluster domain, "+
			"but Bottlerocket always writes one (cluster.local when the setting is unset) and accepts no empty domain")},
		{field: "containerLogMaxFiles", setting: "container-log-max-files", render: func(r *renderer, c *kc) value {
			return int32Ptr(c.ContainerLogMaxFiles)
		}},
		{field: "containerLogMaxSize", setting: "container-log-max-size", render: func(r *renderer, c *kc) value {
			return r.quantity(c.ContainerLogMaxSize)
		}, zero: refuseZero(`""`, `Bottlerocket accepts no empty quantity; the kubelet reads "" as its default, "10Mi": write that, or leave the field out`)},
		{field: "cpuCFSQuota", setting: "cpu-cfs-quota-enforced", render: func(r *renderer, c *kc) value { return boolPtr(c.CPUCFSQuota) }},
		{field: "cpuManagerPolicy", setting: "cpu-manager-policy", render: func(r *renderer, c *kc) value {
			return r.enum(c.CPUManagerPolicy, cpuManagerPolicies()...)
		}, zero: refuseEmptyEnum("none", cpuManagerPolicies())},
		{field: "cpuManagerPolicyOptions", setting: "cpu-manager-policy-options", render: func(r *renderer, c *kc) value {
			return r.cpuManagerPolicyOptions(c.CPUManagerPolicyOptions)
		}},
		{field: "cpuManagerReconcilePeriod", setting: "cpu-manager-reconcile-period", render: func(r *renderer, c *kc) value {
			return r.duration(c.CPUManagerReconcilePeriod.Duration)
		}, zero: zeroDuration},
		{field: "eventBurst", setting: "event-burst", render: func(r *renderer, c *kc) value { return int32Value(c.EventBurst) }, zero: zeroInt},
		{field: "eventRecordQPS", setting: "event-qps", render: func(r *renderer, c *kc) value { return int32Ptr(c.EventRecordQPS) }},
		{field: "evictionHard", setting: "eviction-hard", render: func(r *renderer, c *kc) value {
			if c.EvictionHard != nil && len(c.EvictionHard) == 0 {
				r.invalid(r.cur.field, "{}", "an empty map would disable hard eviction in the kubelet, "+
					"but Bottlerocket treats an empty table as unset and the kubelet's default thresholds would apply")
				return nil
			}
			return r.signalTable(c.EvictionHard, fitThreshold)
		}},
		{field: "evictionMaxPodGracePeriod", setting: "eviction-max-pod-grace-period", render: func(r *renderer, c *kc) value {
			return r.nonNegative(int64(c.EvictionMaxPodGracePeriod))
		}, zero: zeroInt},
		{field: "evictionSoft", setting: "eviction-soft", render: func(r *renderer, c *kc) value {
			return r.signalTable(c.EvictionSoft, fitThreshold)
		}},
		{field: "evictionSoftGracePeriod", setting: "eviction-soft-grace-period", render: func(r *renderer, c *kc) value {
			return r.signalTable(c.EvictionSoftGracePeriod, fitDurationString)
		}},
		{field: "imageGCHighThresholdPercent", setting: "image-gc-high-threshold-percent", render: func(r *renderer, c *kc) value {
			return r.percent(c.ImageGCHighThresholdPercent)
		}},
		{field: "imageGCLowThresholdPercent", setting: "image-gc-low-threshold-percent", render: func(r *renderer, c *kc) value {
			return r.percent(c.ImageGCLowThresholdPercent)
		}},
		{field: "kubeAPIBurst", setting: "kube-api-burst", render: func(r *renderer, c *kc) value { return int32Value(c.KubeAPIBurst) }, zero: zeroInt},
		{field: "kubeAPIQPS", setting: "kube-api-qps", render: func(r *renderer, c *kc) value { return int32Ptr(c.KubeAPIQPS) }},
		{field: "kubeReserved", setting: "kube-reserved", render: func(r *renderer, c *kc) value {
			if c.KubeReserved != nil && len(c.KubeReserved) == 0 {
				r.invalid(r.cur.field, "{}", "an empty map reserves nothing for Kubernetes components, "+
					"but Bottlerocket always reserves cpu, memory and ephemeral-storage (its defaults for the resources the table leaves out)")
				return nil
			}
			return r.reserved(c.KubeReserved)
		}},
		{field: "maxPods", setting: "max-pods", render: func(r *renderer, c *kc) value { return r.nonNegative(int64(c.MaxPods)) },
			zero: refuseZero("0", "0 is not a pod count: the kubelet replaces it with its default of 110, "+
				"and Bottlerocket, which sizes the kube-reserved memory from max-pods, would reserve none; "+
				"set the number of pods, or leave maxPods out for Bottlerocket's default")},
		{field: "memoryManagerPolicy", setting: "memory-manager-policy", render: func(r *renderer, c *kc) value {
			return r.enum(c.MemoryManagerPolicy, memoryManagerPolicies()...)
		}, zero: refuseEmptyEnum("None", memoryManagerPolicies())},
		{field: "podPidsLimit", setting: "pod-pids-limit", render: func(r *renderer, c *kc) value {
			if c.PodPidsLimit == nil {
				return nil
			}
			return tomlInt(*c.PodPidsLimit)
		}},
		{field: "providerID", setting: "provider-id", render: func(r *renderer, c *kc) value { return r.checkedString(c.ProviderID, urlLike) },
			zero: refuseZero(`""`, `Bottlerocket accepts no empty provider ID; the kubelet reads "" as no provider ID, which leaving the field out gives too`)},
		{field: "registryBurst", setting: "registry-burst", render: func(r *renderer, c *kc) value { return int32Value(c.RegistryBurst) }, zero: zeroInt},
		{field: "registryPullQPS", setting: "registry-qps", render: func(r *renderer, c *kc) value { return int32Ptr(c.RegistryPullQPS) }},
		{field: "serverTLSBootstrap", setting: "server-tls-bootstrap", render: func(r *renderer, c *kc) value {
			if !c.ServerTLSBootstrap {
				return nil
			}
			return tomlBool(true)
		}, zero: func(*renderer) value { return tomlBool(false) }},
		{field: "shutdownGracePeriod", setting: "shutdown-grace-period", render: func(r *renderer, c *kc) value {
			return r.duration(c.ShutdownGracePeriod.Duration)
		}, zero: zeroDuration},
		{field: "shutdownGracePeriodCriticalPods", setting: "shutdown-grace-period-for-critical-pods", render: func(r *renderer, c *kc) value {
			return r.duration(c.ShutdownGracePeriodCriticalPods.Duration)
		}, zero: zeroDuration},
		{field: "systemReserved", setting: "system-reserved", render: func(r *renderer, c *kc) value { return r.reserved(c.SystemReserved) }},
		{field: "topologyManagerPolicy", setting: "topology-manager-policy", render: func(r *renderer, c *kc) value {
			return r.enum(c.TopologyManagerPolicy, topologyManagerPolicies()...)
		}, zero: refuseEmptyEnum("none", topologyManagerPolicies())},
		{field: "topologyManagerScope", setting: "topology-manager-scope", render: func(r *renderer, c *kc) value {
			return r.enum(c.TopologyManagerScope, topologyManagerScopes()...)
		}, zero: refuseEmptyEnum("container", topologyManagerScopes())},
	}
}

// The values Bottlerocket accepts for its enumerated settings.
func cpuManagerPolicies() []string    { return []string{"none", "static"} }
func memoryManagerPolicies() []string { return []string{"None", "Static"} }
func topologyManagerPolicies() []string {
	return []string{"none", "restricted", "best-effort", "single-numa-node"}
}
func topologyManagerScopes() []string { return []string{"container", "pod"} }

// zeroInt renders an explicit 0 of a count Bottlerocket takes from zero up.
// For the bursts the kubelet reads 0 as its default (as it reads the
// field's absence); Bottlerocket passes the 0 on (its template writes them
// with includeZero), so the node gets what the document says.
func zeroInt(*renderer) value { return tomlInt(0) }

// zeroDuration renders an explicit zero duration as "0s".
func zeroDuration(*renderer) value { return tomlString("0s") }

// refuseZero makes an explicit zero an *InvalidValueError with reason.
func refuseZero(val, reason string) func(*renderer) value {
	return func(r *renderer) value {
		r.invalid(r.cur.field, val, reason)
		return nil
	}
}

// refuseEmptyEnum refuses "" for an enumerated setting, naming the value
// the kubelet reads "" as.
func refuseEmptyEnum(kubeletDefault string, accepted []string) func(*renderer) value {
	return refuseZero(`""`, fmt.Sprintf(`"" is not one of the values Bottlerocket accepts: %s; the kubelet reads "" as %q: write that, or leave the field out`,
		joinSorted(accepted), kubeletDefault))
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// unsupportedFields returns the sorted JSON names of the set fields of cfg
// that have no mapping: those isSet finds, and those in explicit (fields a
// document sets, zero values included). TypeMeta (embedded) is skipped.
func unsupportedFields(cfg *kubeletv1beta1.KubeletConfiguration, mapped, explicit map[string]bool) []string {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name := jsonName(f)
		if name == "" || mapped[name] || (!explicit[name] && !isSet(v.Field(i))) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// fieldIndex maps the JSON names of t's fields (not the embedded ones) to
// their indexes.
func fieldIndex(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); !f.Anonymous && f.IsExported() {
			if name := jsonName(f); name != "" {
				out[name] = i
			}
		}
	}
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
