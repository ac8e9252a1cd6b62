package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fuzz targets decode each input twice: as a whole file, which almost
// never passes the checksum, and wrapped as the payload of an envelope with
// a correct checksum, which lets the fuzzer reach the payload decoders.

func FuzzDecodeCheckpoint(f *testing.F) {
	full := newConfigMap("uid-a", "1")
	full.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
		Time: &metav1.Time{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:kubelet":{}}}`)},
	}}
	immutable := true
	full.Immutable = &immutable
	for _, cm := range []*corev1.ConfigMap{full, newConfigMap("u", "2"), {ObjectMeta: metav1.ObjectMeta{UID: "x", ResourceVersion: "y"}}} {
		data, err := checkpoint.EncodeCheckpoint(cm)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
		f.Add(payloadOf(data, `"configMap":`))
	}
	for _, s := range []string{"", "{}", "null", `{"version":"dynconfig.io/checkpoint/v1"}`, `{"kind":"ConfigMap","apiVersion":"v1","data":{"a":"b"},"binaryData":{"c":"AAE="}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, envelopeOf("dynconfig.io/checkpoint/v1", "configMap", string(data))} {
			cm, err := checkpoint.DecodeCheckpoint(in)
			if err != nil {
				continue
			}
			enc, err := checkpoint.EncodeCheckpoint(cm)
			if err != nil {
				t.Fatalf("re-encode of a decoded checkpoint: %v", err)
			}
			cm2, err := checkpoint.DecodeCheckpoint(enc)
			if err != nil {
				t.Fatalf("decode of a re-encoded checkpoint: %v\n%s", err, enc)
			}
			if diff := cmp.Diff(cm, cm2, cmpopts.EquateEmpty(), fieldsV1Equal); diff != "" {
				t.Fatalf("round trip changed the ConfigMap (-first +second):\n%s", diff)
			}
			enc2, err := checkpoint.EncodeCheckpoint(cm2)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("encoding is not stable after one round trip: %v\n%s\n%s", err, enc, enc2)
			}
		}
	})
}

// fieldsV1Equal compares managed fields as JSON: encoding/json compacts the
// raw bytes of a FieldsV1 on the way out.
var fieldsV1Equal = cmp.Comparer(func(a, b metav1.FieldsV1) bool {
	var ca, cb bytes.Buffer
	ea, eb := json.Compact(&ca, a.Raw), json.Compact(&cb, b.Raw)
	if ea != nil || eb != nil {
		return bytes.Equal(a.Raw, b.Raw)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
})

func FuzzDecodePointer(f *testing.F) {
	set := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	for _, p := range []checkpoint.Pointer{
		{},
		{SetTime: set},
		{Source: sourceFor(newConfigMap("uid-a", "1")), SetTime: set},
		{Source: &corev1.NodeConfigSource{}, SetTime: set.In(time.FixedZone("x", 3600))},
	} {
		data, err := checkpoint.EncodePointer(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
		f.Add(payloadOf(data, `"pointer":`))
	}
	for _, s := range []string{"", " ", "null", `{"source":null}`, `{"setTime":"2025-01-01T00:00:00+23:59"}`, `{"source":{"configMap":{"uid":"a","resourceVersion":"1"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, envelopeOf("dynconfig.io/pointer/v1", "pointer", string(data))} {
			p, err := checkpoint.DecodePointer(in)
			if err != nil {
				continue
			}
			if k, ok := checkpoint.KeyFromSource(p.Source); ok {
				if err := checkpoint.ValidateKey(k); err != nil {
					t.Fatalf("decoded a pointer with an invalid key: %v", err)
				}
			}
			enc, err := checkpoint.EncodePointer(p)
			if err != nil {
				t.Fatalf("re-encode of a decoded pointer: %v", err)
			}
			p2, err := checkpoint.DecodePointer(enc)
			if err != nil {
				t.Fatalf("decode of a re-encoded pointer: %v\n%s", err, enc)
			}
			if diff := cmp.Diff(p, p2, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(0)); diff != "" {
				t.Fatalf("round trip changed the pointer (-first +second):\n%s", diff)
			}
		}
	})
}

// payloadOf returns what follows field in an envelope, without the closing
// brace: a seed for the wrapped-payload half of a fuzz target.
func payloadOf(data []byte, field string) []byte {
	i := bytes.Index(data, []byte(field))
	return bytes.Clone(data[i+len(field) : len(data)-1])
}

func FuzzDecodeBadMarks(f *testing.F) {
	valid, err := checkpoint.EncodeBadMarks(checkpoint.BadMarks{
		"uid-a/1/kubelet": {Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Reason: "r", Problem: "CrashLoop"},
		"uid-b/2":         {Time: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), Reason: "legacy"},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	for _, s := range []string{"", "{}", "null", "[]", `{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"x"}}`, `{"version":"dynconfig.io/bad-configs/v1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := checkpoint.DecodeBadMarks(data)
		if err != nil {
			return
		}
		enc, err := checkpoint.EncodeBadMarks(m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		m2, legacy, err := checkpoint.DecodeBadMarks(enc)
		if err != nil || legacy {
			t.Fatalf("decode of a re-encoded file: %v (legacy %v)\n%s", err, legacy, enc)
		}
		if diff := cmp.Diff(m, m2, cmpopts.EquateApproxTime(0)); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func FuzzDecodeStartups(f *testing.F) {
	valid, err := checkpoint.EncodeStartups([]time.Time{time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), time.Date(2026, 1, 2, 3, 4, 7, 0, time.UTC)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	for _, s := range []string{"", "[]", "null", "{}", `["2026-01-02T03:04:05Z"]`, `[null]`, `{"version":"dynconfig.io/startups/v1","sha256":"","startups":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, _, err := checkpoint.DecodeStartups(data)
		if err != nil {
			return
		}
		enc, err := checkpoint.EncodeStartups(ts)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		ts2, legacy, err := checkpoint.DecodeStartups(enc)
		if err != nil || legacy || len(ts2) != len(ts) {
			t.Fatalf("decode of a re-encoded file: %v %v (legacy %v)\n%s", ts2, err, legacy, enc)
		}
		for i := range ts {
			if !ts[i].Equal(ts2[i]) {
				t.Fatalf("startup %d: %v became %v", i, ts[i], ts2[i])
			}
		}
	})
}
