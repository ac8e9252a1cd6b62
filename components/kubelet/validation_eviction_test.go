package kubelet

import (
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestValidateEviction(t *testing.T) {
	hard := func(m map[string]string) func(*kubeletv1beta1.KubeletConfiguration) {
		return func(kc *kubeletv1beta1.KubeletConfiguration) { kc.EvictionHard = m }
	}
	soft := func(soft, grace map[string]string) func(*kubeletv1beta1.KubeletConfiguration) {
		return func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EvictionSoft, kc.EvictionSoftGracePeriod = soft, grace
		}
	}
	reclaim := func(m map[string]string) func(*kubeletv1beta1.KubeletConfiguration) {
		return func(kc *kubeletv1beta1.KubeletConfiguration) { kc.EvictionMinimumReclaim = m }
	}
	runValidationCases(t, []validationCase{
		// Signals.
		{"every known signal", hard(map[string]string{
			"memory.available": "100Mi", "allocatableMemory.available": "100Mi",
			"nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%",
			"containerfs.available": "10%", "containerfs.inodesFree": "5%",
			"pid.available": "10%",
		}), nil},
		{"misspelled signal", hard(map[string]string{"memory.avaliable": "100Mi"}),
			[]fieldErr{notSupported("evictionHard[memory.avaliable]")}},
		{"swap is not an eviction signal", hard(map[string]string{"swap.available": "1Gi"}),
			[]fieldErr{notSupported("evictionHard[swap.available]")}},
		{"empty map", hard(map[string]string{}), nil},

		// Quantities.
		{"quantity", hard(map[string]string{"memory.available": "1.5Gi"}), nil},
		{"zero quantity", hard(map[string]string{"memory.available": "0"}),
			[]fieldErr{invalid("evictionHard[memory.available]")}},
		{"negative quantity", hard(map[string]string{"memory.available": "-1Mi"}),
			[]fieldErr{invalid("evictionHard[memory.available]")}},
		{"not a quantity", hard(map[string]string{"memory.available": "lots"}),
			[]fieldErr{invalid("evictionHard[memory.available]")}},
		{"every bad entry reported", hard(map[string]string{
			"memory.available": "lots", "nodefs.available": "150%", "bogus": "1",
		}), []fieldErr{
			notSupported("evictionHard[bogus]"),
			invalid("evictionHard[memory.available]"),
			invalid("evictionHard[nodefs.available]"),
		}},

		// Percentages.
		{"percentage bounds disable the signal", hard(map[string]string{"nodefs.available": "0%", "imagefs.available": "100%"}), nil},
		{"fractional percentage", hard(map[string]string{"nodefs.available": "12.5%"}), nil},
		{"percentage above 100", hard(map[string]string{"nodefs.available": "100.5%"}),
			[]fieldErr{invalid("evictionHard[nodefs.available]")}},
		{"negative percentage", hard(map[string]string{"nodefs.available": "-5%"}),
			[]fieldErr{invalid("evictionHard[nodefs.available]")}},
		{"not a number", hard(map[string]string{"nodefs.available": "ten%"}),
			[]fieldErr{invalid("evictionHard[nodefs.available]")}},
		{"NaN percentage", hard(map[string]string{"nodefs.available": "NaN%"}),
			[]fieldErr{invalid("evictionHard[nodefs.available]")}},

		// Soft thresholds and grace periods.
		{"soft threshold with grace period", soft(
			map[string]string{"memory.available": "1Gi"},
			map[string]string{"memory.available": "1m30s"}), nil},
		{"soft threshold without grace period", soft(
			map[string]string{"memory.available": "1Gi", "nodefs.available": "15%"},
			map[string]string{"memory.available": "1m"}),
			[]fieldErr{required("evictionSoftGracePeriod[nodefs.available]")}},
		{"disabled soft threshold needs no grace period", soft(
			map[string]string{"nodefs.available": "0%"}, nil), nil},
		{"bad soft threshold is reported once", soft(
			map[string]string{"memory.available": "-1"}, nil),
			[]fieldErr{invalid("evictionSoft[memory.available]")}},
		{"grace period without soft threshold", soft(nil, map[string]string{"memory.available": "30s"}), nil},
		{"zero grace period", soft(
			map[string]string{"memory.available": "1Gi"},
			map[string]string{"memory.available": "0s"}), nil},
		{"grace period negative, unparseable and for an unknown signal", soft(nil, map[string]string{
			"memory.available": "-1s", "nodefs.available": "soon", "disk.available": "1m",
		}), []fieldErr{
			notSupported("evictionSoftGracePeriod[disk.available]"),
			invalid("evictionSoftGracePeriod[memory.available]"),
			invalid("evictionSoftGracePeriod[nodefs.available]"),
		}},

		// Minimum reclaim.
		{"minimum reclaim quantity, zero and percentage", reclaim(map[string]string{
			"memory.available": "500Mi", "imagefs.available": "0", "nodefs.available": "5%",
		}), nil},
		{"minimum reclaim zero percentage", reclaim(map[string]string{"nodefs.available": "0%"}),
			[]fieldErr{invalid("evictionMinimumReclaim[nodefs.available]")}},
		{"minimum reclaim negative quantity", reclaim(map[string]string{"memory.available": "-1Mi"}),
			[]fieldErr{invalid("evictionMinimumReclaim[memory.available]")}},
		{"minimum reclaim garbage and unknown signal", reclaim(map[string]string{
			"memory.available": "x%", "cpu.available": "1",
		}), []fieldErr{
			notSupported("evictionMinimumReclaim[cpu.available]"),
			invalid("evictionMinimumReclaim[memory.available]"),
		}},
	})
}

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in     string
		want   float32
		wantOK bool
	}{
		{"10%", 0.1, true},
		{"12.5%", 0.125, true},
		{"10%%", 0.1, true}, // the kubelet drops every trailing '%'
		{"-3%", -0.03, true},
		{"%", 0, false},
		{"NaN%", 0, false},
		{"1e400%", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := parsePercent(tc.in)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("parsePercent(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzEvictionThresholds feeds untrusted signal names and values through
// every eviction map. Validate must not panic, every error must name an
// eviction field, and a value it accepts as a percentage threshold must lie
// in [0%, 100%].
func FuzzEvictionThresholds(f *testing.F) {
	f.Add("memory.available", "100Mi")
	f.Add("nodefs.available", "10%")
	f.Add("nodefs.available", "100%")
	f.Add("imagefs.inodesFree", "-0.0%")
	f.Add("pid.available", "1e309%")
	f.Add("memory.available", "9223372036854775807Ei")
	f.Add("bogus", "%%")
	f.Fuzz(func(t *testing.T, signal, value string) {
		base := &kubeletv1beta1.KubeletConfiguration{}
		Default(base)
		base.EvictionHard = map[string]string{signal: value}
		base.EvictionSoft = map[string]string{signal: value}
		base.EvictionSoftGracePeriod = map[string]string{signal: value}
		base.EvictionMinimumReclaim = map[string]string{signal: value}
		hardOK := true
		for _, e := range Validate(base) {
			if !strings.HasPrefix(e.Field, "eviction") {
				t.Fatalf("error outside the eviction fields: %v", e)
			}
			if strings.HasPrefix(e.Field, "evictionHard[") {
				hardOK = false
			}
		}
		if hardOK && strings.HasSuffix(value, "%") && value != "0%" && value != "100%" {
			p, ok := parsePercent(value)
			if !ok || p < 0 || p > 1 {
				t.Fatalf("accepted hard threshold %q = %v", value, p)
			}
		}
	})
}
