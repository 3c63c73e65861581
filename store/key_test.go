package store

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func TestKeyString(t *testing.T) {
	k := Key{Namespace: Namespace("sluice", "api"), Identity: "203.0.113.7"}
	sum := sha256.Sum256([]byte("203.0.113.7"))
	want := "sluice:api:{" + base64.RawURLEncoding.EncodeToString(sum[:HashBytes]) + "}"
	if got := k.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// An attacker-chosen identity can neither grow the key nor inject separators
// or hash tags.
func TestKeyIdentityCannotShapeKey(t *testing.T) {
	ns := Namespace("sluice", "api")
	base := len(Key{Namespace: ns, Identity: "a"}.String())
	for _, id := range []string{"", "x", strings.Repeat("z", 1<<16), "a:b:{c}", "}{", "\x00\r\n ", "sluice:api:{00}"} {
		k := Key{Namespace: ns, Identity: id}.String()
		if len(k) != base {
			t.Errorf("identity %.20q: key length %d, want %d", id, len(k), base)
		}
		rest := strings.TrimPrefix(k, ns+":{")
		if rest == k || !strings.HasSuffix(rest, "}") {
			t.Fatalf("identity %.20q: key %q has the wrong shape", id, k)
		}
		hash := strings.TrimSuffix(rest, "}")
		if len(hash) != HashLen {
			t.Errorf("identity %.20q: hash %q is %d characters, want HashLen %d", id, hash, len(hash), HashLen)
		}
		for _, c := range hash {
			if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", c) {
				t.Errorf("identity %.20q: key %q holds %q outside the base64url hash", id, k, c)
			}
		}
	}
	if a, b := (Key{ns, "u1"}).String(), (Key{ns, "u2"}).String(); a == b {
		t.Errorf("different identities share key %q", a)
	}
}

func TestKeyAppendToAllocatesOnce(t *testing.T) {
	k := Key{Namespace: "sluice:api", Identity: "client"}
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf = k.AppendTo(buf[:0]) }); n != 0 {
		t.Errorf("AppendTo into a large enough buffer: %v allocs, want 0", n)
	}
}
