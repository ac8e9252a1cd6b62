package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// FuzzRender renders any ConfigRollout the API could hand out (spec and
// status are user-writable): `rollout status` and `rollout history` must
// not panic and must name the rollout.
func FuzzRender(f *testing.F) {
	f.Add(`{"metadata":{"name":"ro","namespace":"ns"},"spec":{"configMapName":"cm","steps":[{"nodes":1},{"pause":{}},{"nodes":"50%"}]},"status":{"phase":"Progressing","currentStep":2,"selected":10,"promoted":3}}`)
	f.Add(`{"metadata":{"name":"ro"},"spec":{"steps":[{"nodes":"10%"}]},"status":{"selected":-4,"promoted":-7,"currentStep":-1}}`)
	f.Add(`{"metadata":{"name":"ro"},"spec":{"steps":[{"nodes":"250%"},{"nodes":-3}]},"status":{"selected":2,"promoted":9,"nodes":[{"name":"a","state":"Failed","reason":"x"}]}}`)
	f.Add(`{"metadata":{"name":"ro"},"spec":{"steps":[{"nodes":5}]},"status":{"selected":10,"promoted":-7}}`)
	f.Add(`{"metadata":{"name":"ro"},"status":{"history":[{"reason":"Started","message":"m"}],"conditions":[{"type":"Halted","status":"True"}]}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var ro v1alpha1.ConfigRollout
		if err := json.Unmarshal([]byte(raw), &ro); err != nil {
			return
		}
		if out := RenderStatus(&ro); !strings.Contains(out, "ConfigRollout "+ro.Namespace+"/"+ro.Name) {
			t.Fatalf("status does not name the rollout:\n%s", out)
		}
		if out := RenderHistory(&ro); !strings.Contains(out, ro.Name) && len(ro.Status.History) == 0 {
			t.Fatalf("history does not name the rollout:\n%s", out)
		}
	})
}
