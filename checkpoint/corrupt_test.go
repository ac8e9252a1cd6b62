package checkpoint_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynconfig/dynconfig/checkpoint"
)

// envelopeOf builds an envelope with a correct checksum around any payload.
func envelopeOf(version, field, payload string) []byte {
	sum := sha256.Sum256([]byte(payload))
	return []byte(fmt.Sprintf(`{"version":%q,"sha256":%q,%q:%s}`, version, hex.EncodeToString(sum[:]), field, payload))
}

// damage is one way to damage a file whose valid content is valid.
type damage struct {
	name  string
	apply func(t *testing.T, path string, valid []byte)
}

func writeDamage(name string, f func(valid []byte) []byte) damage {
	return damage{name, func(t *testing.T, path string, valid []byte) {
		if err := os.WriteFile(path, f(valid), 0o600); err != nil {
			t.Fatal(err)
		}
	}}
}

// commonDamage applies to checkpoints and pointers alike.
func commonDamage(otherValid []byte) []damage {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 512)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	flip := func(valid []byte) []byte {
		b := bytes.Clone(valid)
		i := bytes.LastIndex(b, []byte(`"`)) // inside the payload, before its end
		b[i-1] ^= 0x01
		return b
	}
	return []damage{
		writeDamage("random bytes", func([]byte) []byte { return garbage }),
		writeDamage("zeros", func(v []byte) []byte { return make([]byte, len(v)) }),
		writeDamage("whitespace", func([]byte) []byte { return []byte(" \n") }),
		writeDamage("json null", func([]byte) []byte { return []byte("null") }),
		writeDamage("json object without fields", func([]byte) []byte { return []byte("{}") }),
		writeDamage("json array", func([]byte) []byte { return []byte("[]") }),
		writeDamage("bit flip in payload", flip),
		writeDamage("checksum of other content", func(v []byte) []byte {
			return bytes.Replace(v, []byte(`"sha256":"`), []byte(`"sha256":"00`), 1)
		}),
		writeDamage("uppercase checksum", func(v []byte) []byte {
			i := bytes.Index(v, []byte(`"sha256":"`)) + len(`"sha256":"`)
			return append(append(bytes.Clone(v[:i]), bytes.ToUpper(v[i:i+64])...), v[i+64:]...)
		}),
		writeDamage("unknown version", func(v []byte) []byte {
			return bytes.Replace(v, []byte(`/v1"`), []byte(`/vX"`), 1)
		}),
		writeDamage("no version", func(v []byte) []byte {
			return bytes.Replace(v, []byte(`"version"`), []byte(`"vers1on"`), 1)
		}),
		writeDamage("trailing garbage", func(v []byte) []byte { return append(bytes.Clone(v), "}x"...) }),
		writeDamage("two envelopes", func(v []byte) []byte { return append(bytes.Clone(v), v...) }),
		writeDamage("the other kind of file", func([]byte) []byte { return otherValid }),
		{"a directory", func(t *testing.T, path string, _ []byte) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink to a valid copy", func(t *testing.T, path string, valid []byte) {
			copyPath := path + "-copy"
			if err := os.WriteFile(copyPath, valid, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(copyPath), path); err != nil {
				t.Fatal(err)
			}
		}},
	}
}

func wantCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	var ce *checkpoint.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v, want a *CorruptError", err)
	}
	if ce.Path != path {
		t.Errorf("CorruptError.Path = %q, want %q", ce.Path, path)
	}
	if !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("errors.Is(%v, ErrCorrupt) = false", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	cm := newConfigMap("uid-a", "1")
	k := mustSave(t, s, cm)
	path := checkpointFile(s.Dir(), "uid-a", "1")
	valid, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrent(sourceFor(cm)); err != nil {
		t.Fatal(err)
	}
	pointer, err := os.ReadFile(filepath.Join(s.Dir(), "meta", "current"))
	if err != nil {
		t.Fatal(err)
	}
	other := newConfigMap("uid-b", "1")
	otherData, err := checkpoint.EncodeCheckpoint(other)
	if err != nil {
		t.Fatal(err)
	}
	restore := func(t *testing.T) {
		t.Helper()
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, valid, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	damages := append(commonDamage(pointer),
		writeDamage("empty", func([]byte) []byte { return nil }),
		writeDamage("another key's checkpoint", func([]byte) []byte { return otherData }),
		writeDamage("payload of another kind", func([]byte) []byte {
			return envelopeOf("dynconfig.io/checkpoint/v1", "configMap", `{"kind":"Secret","apiVersion":"v1","metadata":{"uid":"uid-a","resourceVersion":"1"}}`)
		}),
		writeDamage("payload without kind", func([]byte) []byte {
			return envelopeOf("dynconfig.io/checkpoint/v1", "configMap", `{"metadata":{"uid":"uid-a","resourceVersion":"1"}}`)
		}),
		writeDamage("payload null", func([]byte) []byte {
			return envelopeOf("dynconfig.io/checkpoint/v1", "configMap", `null`)
		}),
		writeDamage("payload of the wrong type", func([]byte) []byte {
			return envelopeOf("dynconfig.io/checkpoint/v1", "configMap", `{"kind":"ConfigMap","apiVersion":"v1","data":[1]}`)
		}),
	)
	for i := range valid {
		damages = append(damages, writeDamage(fmt.Sprintf("truncated to %d bytes", i), func(v []byte) []byte { return v[:i] }))
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			restore(t)
			d.apply(t, path, valid)
			got, err := s.Load(k)
			if err == nil {
				t.Fatalf("Load succeeded with %v", got)
			}
			wantCorrupt(t, err, path)
			// The evidence is moved aside, never overwritten in place.
			var ce *checkpoint.CorruptError
			if errors.As(err, &ce); ce.MovedTo == "" {
				t.Fatalf("error %v: not moved to the quarantine", err)
			}
			if ok, err := s.Exists(k); ok || err != nil {
				t.Fatalf("Exists after the quarantine = %v, %v; want false", ok, err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		restore(t)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(k); !errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("Load of a missing checkpoint = %v, want ErrNotFound", err)
		}
	})
	t.Run("restored", func(t *testing.T) {
		restore(t)
		if _, err := s.Load(k); err != nil {
			t.Errorf("Load of the restored checkpoint: %v", err)
		}
	})
}

func TestCorruptPointer(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	cm := newConfigMap("uid-a", "1")
	mustSave(t, s, cm)
	checkpointData, err := os.ReadFile(checkpointFile(s.Dir(), "uid-a", "1"))
	if err != nil {
		t.Fatal(err)
	}
	pointers := []struct {
		name string
		set  func() error
		get  func() (checkpoint.Pointer, error)
	}{
		{"current", func() error { return s.SetCurrent(sourceFor(cm)) }, s.Current},
		{"last-known-good", func() error { return s.SetLastKnownGood(sourceFor(cm)) }, s.LastKnownGood},
	}
	for _, p := range pointers {
		t.Run(p.name, func(t *testing.T) {
			path := filepath.Join(s.Dir(), "meta", p.name)
			if err := p.set(); err != nil {
				t.Fatal(err)
			}
			valid, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			restore := func(t *testing.T) {
				t.Helper()
				if err := os.RemoveAll(path); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, valid, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			damages := append(commonDamage(checkpointData),
				writeDamage("source with a hostile key", func([]byte) []byte {
					return envelopeOf("dynconfig.io/pointer/v1", "pointer", `{"source":{"configMap":{"namespace":"a","name":"b","uid":"..","resourceVersion":"1","kubeletConfigKey":"k"}},"setTime":"2025-01-01T00:00:00Z"}`)
				}),
				writeDamage("bad time", func([]byte) []byte {
					return envelopeOf("dynconfig.io/pointer/v1", "pointer", `{"setTime":"yesterday"}`)
				}),
			)
			// Offset 0 is an empty file: tested below.
			for i := 1; i < len(valid); i++ {
				damages = append(damages, writeDamage(fmt.Sprintf("truncated to %d bytes", i), func(v []byte) []byte { return v[:i] }))
			}
			for _, d := range damages {
				t.Run(d.name, func(t *testing.T) {
					restore(t)
					d.apply(t, path, valid)
					got, err := p.get()
					if err == nil {
						t.Fatalf("read succeeded with %+v", got)
					}
					wantCorrupt(t, err, path)
				})
			}
			for _, local := range []struct {
				name  string
				apply func(t *testing.T)
			}{
				{"missing", func(t *testing.T) {
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
				}},
				{"empty", func(t *testing.T) {
					if err := os.WriteFile(path, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}},
			} {
				// A pointer this package wrote is never empty and never
				// missing from a laid-out state dir: reading either as
				// "local" would let GC delete what it pointed at.
				t.Run(local.name+" is corrupt", func(t *testing.T) {
					restore(t)
					local.apply(t)
					got, err := p.get()
					if err == nil {
						t.Fatalf("read succeeded with %+v", got)
					}
					wantCorrupt(t, err, path)
				})
			}
			t.Run("restored", func(t *testing.T) {
				restore(t)
				if got, err := p.get(); err != nil || got.Source == nil {
					t.Errorf("read of the restored pointer = %+v, %v", got, err)
				}
			})
		})
	}
}
