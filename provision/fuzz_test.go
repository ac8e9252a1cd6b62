package provision

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/dynconfig/dynconfig/merge"
)

// FuzzValidate feeds arbitrary documents to a validator with the proposed
// EKS Anywhere policy. It must not panic; an accepted document must give a
// Document that decodes to Config, a UserDocument that decodes to User, and
// a UserDocument that, validated again, gives Config back (the platform adds
// back exactly what User leaves out, and explicitly empty maps and lists
// survive the round trip). A top-level field the user set to 0, false or ""
// must be in Document and UserDocument with that value, unless a warning
// says the platform replaced it: a zero is never dropped on the way to the
// renderers.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		header,
		header + "maxPods: 50\nresolvConf: /etc/r.conf\n",
		header + "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\n",
		header + "readOnlyPort: 10255\n",
		header + "authentication:\n  webhook:\n    cacheTTL: 5m\n",
		header + "featureGates:\n  A: true\nsystemReserved: {cpu: 500m}\n",
		header + "maxPods: ten\nmaxPod: 1\n",
		header + "clusterDNS: []\nevictionSoft: {}\n",
		header + "featureGates: {}\nallowedUnsafeSysctls: []\n",
		header + "evictionHard:\n  memory.available: null\n",
		header + "maxPods: 0\nserverTLSBootstrap: false\nrotateCertificates: false\nstaticPodPath: \"\"\neventBurst: 0\n",
		header + "cpuCFSQuota: false\nresolvConf: \"\"\nauthentication:\n  webhook:\n    enabled: false\n",
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1e3}`,
		"kind: KubeletConfiguration\n",
		"- a\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	v := eksaValidator(f, EKSAProposedPolicy, ProviderVSphere, EKSAOptions{ResolvConf: "/etc/eksa.conf"})
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := v.Validate(data, "fuzz.yaml")
		if err != nil {
			return
		}
		var cfg kubeletv1beta1.KubeletConfiguration
		if err := json.Unmarshal(res.Document, &cfg); err != nil {
			t.Fatalf("Document does not decode: %v\n%s", err, res.Document)
		}
		if diff := cmp.Diff(&cfg, res.Config); diff != "" {
			t.Fatalf("Config differs from Document (-doc +config):\n%s", diff)
		}
		var user kubeletv1beta1.KubeletConfiguration
		if err := json.Unmarshal(res.UserDocument, &user); err != nil {
			t.Fatalf("UserDocument does not decode: %v\n%s", err, res.UserDocument)
		}
		if diff := cmp.Diff(&user, res.User); diff != "" {
			t.Fatalf("User differs from UserDocument (-doc +user):\n%s", diff)
		}
		checkZerosKept(t, data, res)
		again, err := v.Validate(res.UserDocument, "fuzz.yaml")
		if err != nil {
			t.Fatalf("UserDocument does not validate again: %v\n%s", err, res.UserDocument)
		}
		if diff := cmp.Diff(res.Config, again.Config); diff != "" {
			t.Fatalf("validating UserDocument does not give Config (-first +second):\n%s", diff)
		}
	})
}

// checkZerosKept checks that every top-level field data (an accepted
// document) sets to 0, false or "" is in res.Document and res.UserDocument
// with that value, or was replaced by the platform (a warning says so).
func checkZerosKept(t *testing.T, data []byte, res *Result) {
	t.Helper()
	tree := parseTree(data)
	var doc, user map[string]any
	if err := json.Unmarshal(res.Document, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.UserDocument, &user); err != nil {
		t.Fatal(err)
	}
	for k, v := range tree {
		if n, ok := v.(json.Number); ok && (n.String() == "0" || n.String() == "-0") {
			v = float64(0)
		}
		if v != false && v != float64(0) && v != "" {
			continue
		}
		replaced := false
		for _, w := range res.Warnings {
			replaced = replaced || strings.Contains(w, ": "+k+": value replaced")
		}
		if replaced {
			continue
		}
		if got, ok := doc[k]; !ok || got != v {
			t.Errorf("%s: %#v in the user's document, %#v in Document", k, v, got)
		}
		if got, ok := user[k]; !ok || got != v {
			t.Errorf("%s: %#v in the user's document, %#v in UserDocument", k, v, got)
		}
	}
}

// FuzzValidateReplaced feeds arbitrary documents to a validator with the
// alternate EKS Anywhere policy on docker, where the platform's evictionHard
// and tlsCipherSuites replace the user's (PlatformWins), and to one where
// the user's values stand (UserWins). A user's invalid value is an error
// under every policy: a document the first accepts, the second accepts too.
func FuzzValidateReplaced(f *testing.F) {
	for _, seed := range []string{
		header,
		header + "evictionHard:\n  memory.available: 100Mi\n",
		header + "evictionHard:\n  memory.available: 150%\n",
		header + "evictionHard:\n  memory.availble: 100Mi\n",
		header + "evictionHard: {}\ntlsCipherSuites: []\n",
		header + "tlsCipherSuites: [TLS_NOT_A_SUITE]\nmaxPods: 0\n",
		header + "evictionHard:\n  nodefs.available: -1%\nmaxPods: -3\n",
		header + "evictionHard: null\n",
	} {
		f.Add([]byte(seed))
	}
	managed, err := EKSAManagedFields(ProviderDocker)
	if err != nil {
		f.Fatal(err)
	}
	alt, err := EKSAAlternatePolicy(EKSAOptions{Managed: managed})
	if err != nil {
		f.Fatal(err)
	}
	mine := Policy{Owner: alt.Owner}
	for _, fl := range alt.Fields {
		if fl.Rule == merge.PlatformWins {
			fl.Rule = merge.UserWins
		}
		mine.Fields = append(mine.Fields, fl)
	}
	replacing, err := NewValidator(alt)
	if err != nil {
		f.Fatal(err)
	}
	standing, err := NewValidator(mine)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, errReplacing := replacing.Validate(data, "fuzz.yaml")
		_, errStanding := standing.Validate(data, "fuzz.yaml")
		if errReplacing == nil && errStanding != nil {
			t.Fatalf("accepted where the platform replaces the user's values, refused where they stand: %v\n%s", errStanding, data)
		}
	})
}

// FuzzParseNodeLabels checks that String writes what ParseNodeLabels reads.
func FuzzParseNodeLabels(f *testing.F) {
	for _, seed := range []string{"", "a=b", "a=b,c=d", " a = b ,,", "x", "a=b=c", "=", "a=1,a=2"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := ParseNodeLabels(s)
		if diff := cmp.Diff(l, ParseNodeLabels(l.String())); diff != "" {
			t.Fatalf("ParseNodeLabels(String()) of %q (-first +second):\n%s", s, diff)
		}
	})
}
