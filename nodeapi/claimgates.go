package nodeapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// GateMemory is what a rollout's health gates (spec.analysis) remember of
// one Node, kept in its claim so that a new controller (a leader change, a
// restart, an upgrade) carries on where the last one stopped: the soak is
// not started again, and the pods are judged against the baseline taken
// before the assignment, not one taken after it (when the pods the new
// config broke would be in it).
type GateMemory struct {
	// SoakStarted is when the Node's soak began: written once, in a
	// claim-only patch, when the rollout first sees the Node's component
	// report the config promoted. A Node that holds its promotion for the
	// gates (Claim.HoldUntil) needs none: its soak starts when its trial
	// ends (ConfigStatus.TrialEnds), which the Node reports itself. Nil:
	// not written.
	SoakStarted *metav1.Time `json:"soakStarted,omitempty"`
	// Pods is the pods gate's baseline (spec.analysis.pods), taken before
	// the assignment and written in the assignment's PATCH. Nil: none was
	// taken (a rollout without a pods gate, or a controller from before
	// the field).
	Pods *PodBaseline `json:"pods,omitempty"`
}

// PodKeyLength is the length in bytes of a PodKey as a PodBaseline
// spells it: 48 bits, so that two pods of one Node share a key with a
// chance of about n²/2⁴⁹ (2·10⁻¹¹ for 110 pods).
const PodKeyLength = 6

// MaxBaselinePods bounds each list of a PodBaseline (Failed, Ready): a
// list of this many keys is 8 KiB in the annotation. A writer keeps the
// first MaxBaselinePods keys in order (BaselineOf).
const MaxBaselinePods = 1024

// PodKey names a pod in a PodBaseline: the first PodKeyLength bytes of
// the SHA-256 of its UID, as a number.
type PodKey uint64

// PodKeyOf returns the key of the pod with the given UID.
func PodKeyOf(uid types.UID) PodKey {
	sum := sha256.Sum256([]byte(uid))
	var b [8]byte
	copy(b[8-PodKeyLength:], sum[:PodKeyLength])
	return PodKey(binary.BigEndian.Uint64(b[:]))
}

// PodBaseline is what the pods bound to a Node were before a rollout
// assigned it, compactly: each list is the keys (PodKeyOf) of its pods,
// PodKeyLength bytes each, sorted, in unpadded standard base64. A
// baseline of 110 Ready pods is 880 bytes.
type PodBaseline struct {
	// Failed are the pods in phase Failed: they do not count as newly
	// failed.
	Failed string `json:"failed,omitempty"`
	// Ready are the pods that were Ready: the ones that must stay Ready
	// (spec.analysis.pods.maxUnready counts against how many they are).
	Ready string `json:"ready,omitempty"`
}

// BaselineOf returns the baseline of the pods with the given UIDs, failed
// and ready; each list is cut to MaxBaselinePods keys (the lowest ones),
// and a key that repeats counts once.
func BaselineOf(failed, ready []types.UID) *PodBaseline {
	return &PodBaseline{Failed: encodePodKeys(failed), Ready: encodePodKeys(ready)}
}

func encodePodKeys(uids []types.UID) string {
	keys := make([]PodKey, 0, len(uids))
	for _, u := range uids {
		keys = append(keys, PodKeyOf(u))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) > MaxBaselinePods {
		keys = keys[:MaxBaselinePods]
	}
	b := make([]byte, 0, len(keys)*PodKeyLength)
	for _, k := range keys {
		var w [8]byte
		binary.BigEndian.PutUint64(w[:], uint64(k))
		b = append(b, w[8-PodKeyLength:]...)
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// decodePodKeys decodes one list of a PodBaseline; the error names it.
func decodePodKeys(field, s string) (map[PodKey]bool, error) {
	b, err := base64.RawStdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not unpadded base64: %w", field, err)
	}
	if len(b)%PodKeyLength != 0 {
		return nil, fmt.Errorf("%s: %d bytes, not a whole number of %d-byte pod keys", field, len(b), PodKeyLength)
	}
	if n := len(b) / PodKeyLength; n > MaxBaselinePods {
		return nil, fmt.Errorf("%s: %d pod keys, at most %d", field, n, MaxBaselinePods)
	}
	out := make(map[PodKey]bool, len(b)/PodKeyLength)
	for i := 0; i < len(b); i += PodKeyLength {
		var w [8]byte
		copy(w[8-PodKeyLength:], b[i:i+PodKeyLength])
		out[PodKey(binary.BigEndian.Uint64(w[:]))] = true
	}
	return out, nil
}

// Keys returns the baseline's two lists as sets of keys; an error names
// the list that does not decode.
func (b *PodBaseline) Keys() (failed, ready map[PodKey]bool, err error) {
	failed, ferr := decodePodKeys("failed", b.Failed)
	ready, rerr := decodePodKeys("ready", b.Ready)
	if err := errors.Join(ferr, rerr); err != nil {
		return nil, nil, err
	}
	return failed, ready, nil
}

// Validate checks the memory: its pod baseline decodes (Keys) and its soak
// start is set when present.
func (g *GateMemory) Validate() error {
	var errs []error
	if g.SoakStarted != nil && g.SoakStarted.IsZero() {
		errs = append(errs, errors.New("soakStarted: a zero time"))
	}
	if g.Pods != nil {
		if _, _, err := g.Pods.Keys(); err != nil {
			errs = append(errs, fmt.Errorf("pods: %w", err))
		}
	}
	return errors.Join(errs...)
}
