package checkpoint

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fullBadMarks returns a bad-configs file as the store writes it with n marks
// (MaxUnreferencedBadMarks is the most a node keeps of unreferenced ones).
func fullBadMarks(tb testing.TB, n int) []byte {
	tb.Helper()
	m := BadMarks{}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("bad-%04d/%d/config", i, 1000+i)
		if i%10 == 0 {
			key = fmt.Sprintf("bad-%04d/%d", i, 1000+i) // the older form
		}
		problem := "ValidateFailed"
		if i%3 == 0 {
			problem = ""
		}
		m[key] = BadMark{Time: t0.Add(time.Duration(i) * time.Minute), Reason: "failed to validate current: \"x\" <bad>", Problem: problem}
	}
	data, err := encodeBadMarks(m)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func BenchmarkDecodeBadMarks100(b *testing.B) {
	data := fullBadMarks(b, MaxUnreferencedBadMarks)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeBadMarks(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadBadMarks100(b *testing.B) {
	data := fullBadMarks(b, MaxUnreferencedBadMarks)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := readBadMarks(data); err != nil {
			b.Fatal(err)
		}
	}
}

// badMarksCases are payloads at the edges of readBadMarks's scanner: each
// is read the same way as decodeBadMarks reads it.
var badMarksCases = []string{
	`{}`,
	` { } `,
	`null`,
	`[]`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"x"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"x","problem":"CrashLoop"},"uid/2/k":{"reason":"y","time":"2026-01-02T03:04:05.5+02:00"}}`,
	`{"uid/1":{"Time":"2026-01-02T03:04:05Z","reason":"x"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","REASON":"x"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","time":"2026-01-03T03:04:05Z"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":null}}`,
	`{"uid/1":{"time":null,"reason":"x"}}`,
	`{"uid/1":{"reason":"x"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","extra":1}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"a\"b\u003c\n\ud83d\ude00"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"a\qb"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z","reason":"` + "\xff" + `"}}`,
	`{"uid/1":{"time":"0001-01-01T00:00:00Z","reason":"x"}}`,
	`{"uid/1":{"time":"2026-01-02","reason":"x"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z"},"uid/1":{"time":"2026-01-03T03:04:05Z"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z"}} }`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z"}} x`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z"},}`,
	`{"uid":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1/k/x":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"./1":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"u\u00efd/1":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uïd/1/k":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1/..k":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1/k k":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1/` + "\t" + `":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"u id/1":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1\\x":{"time":"2026-01-02T03:04:05Z"}}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z"}`,
	`{"uid/1":{"time":"2026-01-02T03:04:05Z",}}`,
	`{"uid/1":{}}`,
	`{"uid/1":null}`,
	"{\"uid/1\":{\"time\":\"2026-01-02T03:04:05Z\"\n,\r\"reason\"\t:\"x\"}}",
}

// TestReadBadMarksSameAsDecode: readBadMarks gives decodeBadMarks's marks,
// legacy flag and error on every case, as an envelope and as the plain
// object older versions wrote; and it reads a full list itself.
func TestReadBadMarksSameAsDecode(t *testing.T) {
	for _, c := range badMarksCases {
		compareBadMarksReaders(t, []byte(c))
		compareBadMarksReaders(t, envelope(badMarksVersion, "badConfigs", []byte(c)))
	}
	full := fullBadMarks(t, MaxUnreferencedBadMarks)
	compareBadMarksReaders(t, full)
	payload, _, err := openEnvelope(full, badMarksVersion, "badConfigs")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := scanBadMarks(payload); !ok || len(m) != MaxUnreferencedBadMarks {
		t.Fatalf("the scanner did not read a full list as the store writes it (ok %v, %d marks)", ok, len(m))
	}
}

func compareBadMarksReaders(t *testing.T, data []byte) {
	t.Helper()
	want, wantLegacy, wantErr := decodeBadMarks(data)
	got, gotLegacy, gotErr := readBadMarks(data)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, decodeBadMarks error %v", data, gotErr, wantErr)
	}
	if gotLegacy != wantLegacy {
		t.Fatalf("%q: legacy %v, decodeBadMarks legacy %v", data, gotLegacy, wantLegacy)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q: marks differ (-decodeBadMarks +readBadMarks):\n%s", data, diff)
	}
}

// FuzzReadBadMarks: on any file, readBadMarks and decodeBadMarks agree.
func FuzzReadBadMarks(f *testing.F) {
	for _, c := range badMarksCases {
		f.Add([]byte(c))
		f.Add(envelope(badMarksVersion, "badConfigs", []byte(c)))
	}
	f.Add(fullBadMarks(f, 5))
	f.Fuzz(func(t *testing.T, data []byte) {
		compareBadMarksReaders(t, data)
	})
}
