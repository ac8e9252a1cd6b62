package kubelet

import (
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EvictionSignals returns the eviction signal names the kubelet accepts as
// keys of evictionHard, evictionSoft, evictionSoftGracePeriod and
// evictionMinimumReclaim, in a fixed order.
func EvictionSignals() []string {
	return []string{
		"memory.available",
		"allocatableMemory.available",
		"nodefs.available",
		"nodefs.inodesFree",
		"imagefs.available",
		"imagefs.inodesFree",
		"containerfs.available",
		"containerfs.inodesFree",
		"pid.available",
	}
}

func knownSignal(s string) bool {
	switch s {
	case "memory.available", "allocatableMemory.available",
		"nodefs.available", "nodefs.inodesFree",
		"imagefs.available", "imagefs.inodesFree",
		"containerfs.available", "containerfs.inodesFree",
		"pid.available":
		return true
	}
	return false
}

// validateEviction applies the kubelet's eviction threshold parsing (upstream
// ParseThresholdConfig in pkg/kubelet/eviction/helpers.go) to the four
// eviction maps, reporting every bad entry instead of the first.
func (v *validator) validateEviction() {
	kc := v.kc
	for _, signal := range sortedKeys(kc.EvictionHard) {
		v.threshold("evictionHard", signal, kc.EvictionHard[signal])
	}
	for _, signal := range sortedKeys(kc.EvictionSoft) {
		if !v.threshold("evictionSoft", signal, kc.EvictionSoft[signal]) {
			continue
		}
		if _, ok := kc.EvictionSoftGracePeriod[signal]; !ok {
			v.add(field.Required(field.NewPath("evictionSoftGracePeriod").Key(signal),
				"a grace period is required for every soft eviction threshold"))
		}
	}
	for _, signal := range sortedKeys(kc.EvictionSoftGracePeriod) {
		path := func() *field.Path { return field.NewPath("evictionSoftGracePeriod").Key(signal) }
		if !knownSignal(signal) {
			v.add(field.NotSupported(path(), signal, EvictionSignals()))
			continue
		}
		raw := kc.EvictionSoftGracePeriod[signal]
		d, err := time.ParseDuration(raw)
		if err != nil {
			v.add(field.Invalid(path(), raw, "must be a duration such as \"1m30s\""))
			continue
		}
		if d < 0 {
			v.add(field.Invalid(path(), raw, "must not be negative"))
		}
	}
	for _, signal := range sortedKeys(kc.EvictionMinimumReclaim) {
		path := func() *field.Path { return field.NewPath("evictionMinimumReclaim").Key(signal) }
		if !knownSignal(signal) {
			v.add(field.NotSupported(path(), signal, EvictionSignals()))
			continue
		}
		raw := kc.EvictionMinimumReclaim[signal]
		if strings.HasSuffix(raw, "%") {
			p, ok := parsePercent(raw)
			switch {
			case !ok:
				v.add(field.Invalid(path(), raw, "must be a percentage such as \"5%\" or a quantity such as \"500Mi\""))
			case p <= 0:
				v.add(field.Invalid(path(), raw, "a percentage minimum reclaim must be positive"))
			}
			continue
		}
		q, err := resource.ParseQuantity(raw)
		if err != nil {
			v.add(field.Invalid(path(), raw, "must be a percentage such as \"5%\" or a quantity such as \"500Mi\""))
			continue
		}
		if q.Sign() < 0 {
			v.add(field.Invalid(path(), raw, "must not be negative"))
		}
	}
}

// threshold checks one eviction threshold statement of the map named by
// fieldName and reports whether it is an active threshold: "0%" and "100%"
// switch a signal off, as upstream documents, and bad statements are not
// active either.
func (v *validator) threshold(fieldName, signal, raw string) bool {
	path := func() *field.Path { return field.NewPath(fieldName).Key(signal) }
	if !knownSignal(signal) {
		v.add(field.NotSupported(path(), signal, EvictionSignals()))
		return false
	}
	if strings.HasSuffix(raw, "%") {
		if raw == "0%" || raw == "100%" {
			return false
		}
		p, ok := parsePercent(raw)
		switch {
		case !ok:
			v.add(field.Invalid(path(), raw, "must be a percentage such as \"10%\" or a quantity such as \"100Mi\""))
			return false
		case p < 0:
			v.add(field.Invalid(path(), raw, "a percentage threshold must be at least 0%"))
			return false
		case p > 1:
			v.add(field.Invalid(path(), raw, "a percentage threshold must be at most 100%"))
			return false
		}
		return true
	}
	q, err := resource.ParseQuantity(raw)
	if err != nil {
		v.add(field.Invalid(path(), raw, "must be a percentage such as \"10%\" or a quantity such as \"100Mi\""))
		return false
	}
	if q.Sign() <= 0 {
		v.add(field.Invalid(path(), raw, "a quantity threshold must be positive"))
		return false
	}
	return true
}

// parsePercent parses "12.5%" as the fraction 0.125, with the kubelet's
// precision (float32) and leniency (every trailing '%' is dropped). Unlike
// the kubelet it rejects NaN, which would otherwise pass every range check.
func parsePercent(s string) (float32, bool) {
	f, err := strconv.ParseFloat(strings.TrimRight(s, "%"), 32)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return float32(f) / 100, true
}
