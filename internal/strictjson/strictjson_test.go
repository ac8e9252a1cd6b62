package strictjson

import (
	"strings"
	"testing"
)

func TestUnmarshal(t *testing.T) {
	type rec struct {
		A int `json:"a"`
	}
	for _, tc := range []struct {
		in, wantErr string
	}{
		{in: `{"a":1}`},
		{in: `{"a":1,"b":2}`, wantErr: `unknown field "b"`},
		{in: `{"a":1} {}`, wantErr: "trailing data"},
		{in: `{"a":"x"}`, wantErr: "cannot unmarshal"},
		{in: ``, wantErr: "EOF"},
	} {
		var r rec
		err := Unmarshal([]byte(tc.in), &r)
		if tc.wantErr == "" {
			if err != nil || r.A != 1 {
				t.Errorf("%q: %+v, %v", tc.in, r, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.wantErr)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte(`{"a":1} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r struct {
			A int `json:"a"`
		}
		_ = Unmarshal(data, &r)
	})
}
