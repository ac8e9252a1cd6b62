package crashloop

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzDecodeStartups(f *testing.F) {
	for _, seed := range []string{
		`["2026-03-01T12:00:01.123456789Z","2026-03-01T12:00:02.5Z","2026-03-01T12:00:03Z"]` + "\n",
		`[]`,
		`null`,
		`{}`,
		`[1,2]`,
		``,
		`["2026-03-01T12:00:01Z"`,
		`["2026-03-01T13:00:02+01:00", "0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999999999-23:59"]`,
		`["2026-03-01t12:00:01z"]`,
		`["2026-03-01T12:00:01.1234567891Z"]`,
		"\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := decodeStartups(data)
		if err != nil {
			if ts != nil {
				t.Fatalf("decode error %v with a non-nil result %v", err, ts)
			}
			return
		}
		enc, err := encodeStartups(ts)
		if err != nil {
			t.Fatalf("decoded %q to %v, which does not encode: %v", data, ts, err)
		}
		again, err := decodeStartups(enc)
		if err != nil {
			t.Fatalf("re-encoded %q does not decode: %v", enc, err)
		}
		if diff := cmp.Diff(ts, again); diff != "" {
			t.Fatalf("round trip of %q through %q changed the times (-first +second):\n%s", data, enc, diff)
		}
		enc2, err := encodeStartups(again)
		if err != nil || string(enc2) != string(enc) {
			t.Fatalf("encoding is not stable: %q then %q (%v)", enc, enc2, err)
		}
	})
}
