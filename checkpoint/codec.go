package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Envelope versions. A reader accepts exactly its own version (see the
// compatibility policy in doc.go): a pointer or checkpoint of a newer
// version is ErrNewerFormat, neither misread nor treated as damage.
const (
	checkpointVersion = "dynconfig.io/checkpoint/v1"
	pointerVersion    = "dynconfig.io/pointer/v1"
	badMarksVersion   = "dynconfig.io/bad-configs/v1"
	startupsVersion   = "dynconfig.io/startups/v1"
)

// maxFileSize bounds what is read from a checkpoint or pointer file. A
// ConfigMap holds at most 1 MiB of data; JSON escaping can grow that a few
// times, never this much.
const maxFileSize = 32 << 20

// checkpointEnvelope is the file format of a checkpoint:
//
//	{"version":"dynconfig.io/checkpoint/v1","sha256":"<hex>","configMap":<payload>}
//
// The checksum is over the payload bytes exactly as they are in the file, so
// it does not depend on Go types or on how a later version serializes them.
type checkpointEnvelope struct {
	Version   string          `json:"version"`
	SHA256    string          `json:"sha256"`
	ConfigMap json.RawMessage `json:"configMap"`
}

// pointerEnvelope is the file format of meta/current and
// meta/last-known-good:
//
//	{"version":"dynconfig.io/pointer/v1","sha256":"<hex>","pointer":<payload>}
//
// An empty file is also a valid pointer: the local config.
type pointerEnvelope struct {
	Version string          `json:"version"`
	SHA256  string          `json:"sha256"`
	Pointer json.RawMessage `json:"pointer"`
}

// pointerPayload is the checksummed content of a pointer file.
type pointerPayload struct {
	Source   *corev1.NodeConfigSource `json:"source,omitempty"`
	SetTime  time.Time                `json:"setTime"`
	FirstRun time.Time                `json:"firstRun,omitzero"`
}

func checksum(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// envelope builds {"version":v,"sha256":sum,"<field>":payload} by hand, so
// that the payload is stored byte for byte as it was hashed (encoding/json
// would re-compact and re-escape a json.RawMessage).
func envelope(version, field string, payload []byte) []byte {
	sum := checksum(payload)
	b := make([]byte, 0, len(payload)+len(version)+len(sum)+len(field)+40)
	b = append(b, `{"version":"`...)
	b = append(b, version...)
	b = append(b, `","sha256":"`...)
	b = append(b, sum...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, payload...)
	b = append(b, '}')
	return b
}

// canonicalPayload returns the payload of data when data is exactly what
// envelope(version, field, payload) writes, with a checksum that matches;
// ok is false otherwise (the caller then parses data as JSON, which accepts
// any other spelling of an envelope and says what is wrong with it). Every
// file this package writes takes this path, which reads the payload once
// instead of scanning the whole file twice.
func canonicalPayload(data []byte, version, field string) (payload []byte, ok bool) {
	const sumLen = sha256.Size * 2
	head := len(`{"version":"`) + len(version) + len(`","sha256":"`)
	tail := len(`","`) + len(field) + len(`":`)
	if len(data) < head+sumLen+tail+2 || data[len(data)-1] != '}' ||
		string(data[:head]) != `{"version":"`+version+`","sha256":"` ||
		string(data[head+sumLen:head+sumLen+tail]) != `","`+field+`":` {
		return nil, false
	}
	payload = data[head+sumLen+tail : len(data)-1]
	if checksum(payload) != string(data[head:head+sumLen]) {
		return nil, false
	}
	return payload, true
}

// verify checks version and checksum of a decoded envelope.
func verify(gotVersion, wantVersion, sum string, payload json.RawMessage) error {
	if gotVersion != wantVersion {
		if newerVersion(gotVersion, wantVersion) {
			return fmt.Errorf("%w: unknown envelope version %q, this version reads %q", ErrNewerFormat, gotVersion, wantVersion)
		}
		return fmt.Errorf("unknown envelope version %q, want %q", gotVersion, wantVersion)
	}
	if len(payload) == 0 {
		return fmt.Errorf("no payload")
	}
	if got := checksum(payload); got != sum {
		return fmt.Errorf("checksum mismatch: file says sha256 %q, payload has %q", sum, got)
	}
	return nil
}

// newerVersion reports whether got is a later version of the same format
// as want: "<prefix>/v<N>" with the same prefix and a larger N.
func newerVersion(got, want string) bool {
	gp, gv, ok1 := strings.Cut(got, "/v")
	wp, wv, ok2 := strings.Cut(want, "/v")
	if !ok1 || !ok2 || gp != wp {
		return false
	}
	g, err1 := strconv.Atoi(gv)
	w, err2 := strconv.Atoi(wv)
	return err1 == nil && err2 == nil && g > w
}

// encodeCheckpoint serializes the whole ConfigMap, with kind "ConfigMap" and
// apiVersion "v1", into a checkpoint envelope. cm is not modified.
func encodeCheckpoint(cm *corev1.ConfigMap) ([]byte, error) {
	c := *cm // shallow copy: only TypeMeta is changed
	c.Kind, c.APIVersion = "ConfigMap", "v1"
	payload, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("serialize ConfigMap %s: %w", KeyOf(cm), err)
	}
	return envelope(checkpointVersion, "configMap", payload), nil
}

// decodeCheckpoint parses and verifies a checkpoint envelope. Every error
// means the data is corrupt.
func decodeCheckpoint(data []byte) (*corev1.ConfigMap, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	payload, ok := canonicalPayload(data, checkpointVersion, "configMap")
	if !ok {
		var env checkpointEnvelope
		if err := json.Unmarshal(data, &env); err != nil {
			return nil, fmt.Errorf("decode envelope: %w", err)
		}
		if err := verify(env.Version, checkpointVersion, env.SHA256, env.ConfigMap); err != nil {
			return nil, err
		}
		payload = env.ConfigMap
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(payload, cm); err != nil {
		return nil, fmt.Errorf("decode ConfigMap: %w", err)
	}
	if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		return nil, fmt.Errorf("payload is kind %q apiVersion %q, want ConfigMap v1", cm.Kind, cm.APIVersion)
	}
	return cm, nil
}

// normalizeSource returns nil for the local config (nil, or no ConfigMap).
func normalizeSource(src *corev1.NodeConfigSource) *corev1.NodeConfigSource {
	if src == nil || src.ConfigMap == nil {
		return nil
	}
	return src
}

// encodePointer serializes p into a pointer envelope. The time is stored in
// UTC with nanoseconds.
func encodePointer(p Pointer) ([]byte, error) {
	pp := pointerPayload{Source: normalizeSource(p.Source), SetTime: p.SetTime.UTC()}
	if !p.FirstRun.IsZero() {
		pp.FirstRun = p.FirstRun.UTC()
	}
	payload, err := json.Marshal(pp)
	if err != nil {
		return nil, fmt.Errorf("serialize pointer: %w", err)
	}
	return envelope(pointerVersion, "pointer", payload), nil
}

// decodePointer parses and verifies a pointer file. A source whose key is
// not valid is an error: no writer of this package produces one, and a
// caller must be able to pass it to Load. Every error means the data is
// corrupt, including empty data: this package writes the local config as an
// envelope without a source, so a zero-length pointer is a torn or truncated
// file, and reading it as "local" would let GC delete the checkpoint it
// pointed at.
func decodePointer(data []byte) (Pointer, error) {
	if len(data) == 0 {
		return Pointer{}, fmt.Errorf("empty file")
	}
	payload, ok := canonicalPayload(data, pointerVersion, "pointer")
	if !ok {
		var env pointerEnvelope
		if err := json.Unmarshal(data, &env); err != nil {
			return Pointer{}, fmt.Errorf("decode envelope: %w", err)
		}
		if err := verify(env.Version, pointerVersion, env.SHA256, env.Pointer); err != nil {
			return Pointer{}, err
		}
		payload = env.Pointer
	}
	// Fields this version does not know are ignored: the checksum has
	// verified the payload, and a newer version of this format adds only
	// fields an older reader may ignore (doc.go, compatibility policy).
	var p pointerPayload
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&p); err != nil {
		return Pointer{}, fmt.Errorf("decode pointer: %w", err)
	}
	if dec.More() {
		return Pointer{}, fmt.Errorf("decode pointer: trailing data")
	}
	src := normalizeSource(p.Source)
	if k, ok := KeyFromSource(src); ok {
		if err := ValidateKey(k); err != nil {
			return Pointer{}, fmt.Errorf("pointer references an invalid key: %w", err)
		}
	}
	return Pointer{Source: src, SetTime: p.SetTime, FirstRun: p.FirstRun}, nil
}
