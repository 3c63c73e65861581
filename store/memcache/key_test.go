package memcache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// legal is memcached's rule for a key: at most 250 bytes, no space, control
// character or DEL.
func legal(k string) bool {
	if len(k) == 0 || len(k) > memcache.MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] == 0x7f {
			return false
		}
	}
	return true
}

func TestKey(t *testing.T) {
	longest := strings.Repeat("p", core.MaxNameLen)
	// The longest prefix whose keys are legal as they are: 250 bytes with
	// the longest policy name, its separators and the identity's hash.
	longestPrefix := memcache.MaxKeyLen - len(":") - core.MaxNameLen - len(":{}") - store.HashLen
	for _, tc := range []struct {
		prefix string
		asIs   bool // the key is core's own, unchanged
	}{
		{core.DefaultPrefix, true},
		{"tenant-42.api", true},
		{"ünïcode", true}, // bytes above 0x7f are legal
		{strings.Repeat("x", longestPrefix), true},
		{strings.Repeat("x", longestPrefix+1), false}, // 251 bytes with the longest policy name
		{strings.Repeat("x", 10_000), false},
		{"with space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"", true},
	} {
		key := store.Key{Namespace: store.Namespace(tc.prefix, longest), Identity: "client 1\r\n"}
		got := memcache.Key(key)
		if !legal(got) {
			t.Errorf("prefix %.20q: key %q is not a legal memcached key", tc.prefix, got)
		}
		if asIs := got == key.String(); asIs != tc.asIs {
			t.Errorf("prefix %.20q: key %q; core's key unchanged = %v, want %v", tc.prefix, got, asIs, tc.asIs)
		}
		if got != memcache.Key(key) {
			t.Errorf("prefix %.20q: Key is not deterministic", tc.prefix)
		}
	}
	// Hashed namespaces stay apart, and apart from the identity.
	a := store.Key{Namespace: strings.Repeat("x", 300) + "a:p", Identity: "id"}
	b := store.Key{Namespace: strings.Repeat("x", 300) + "b:p", Identity: "id"}
	c := store.Key{Namespace: a.Namespace, Identity: "other"}
	if ka, kb, kc := memcache.Key(a), memcache.Key(b), memcache.Key(c); ka == kb || ka == kc {
		t.Errorf("keys %q, %q, %q: two of them are equal", ka, kb, kc)
	}
	// A legal namespace that reads like a hashed one does not share its key.
	hashed := memcache.Key(store.Key{Namespace: "a b:c", Identity: "id"})
	ns, _, _ := strings.Cut(hashed, ":")
	if look := memcache.Key(store.Key{Namespace: ns, Identity: "id"}); look == hashed {
		t.Errorf("namespaces %q and %q share the key %q", "a b:c", ns, hashed)
	}
	// The longest namespace kept as it is: 231 bytes.
	for n, asIs := range map[int]bool{231: true, 232: false} {
		k := store.Key{Namespace: strings.Repeat("n", n), Identity: "id"}
		if got := memcache.Key(k) == k.String(); got != asIs {
			t.Errorf("a namespace of %d bytes kept as it is: %v, want %v", n, got, asIs)
		}
	}
}

func FuzzKey(f *testing.F) {
	f.Add("sluice", "api", "id")
	f.Add(strings.Repeat(" ", 300), "p", "")
	f.Add("\x00\x01", "x", "\xff")
	f.Fuzz(func(t *testing.T, prefix, policy, identity string) {
		if k := memcache.Key(store.Key{Namespace: store.Namespace(prefix, policy), Identity: identity}); !legal(k) {
			t.Fatalf("Key(%q, %q, %q) = %q: not a legal memcached key", prefix, policy, identity, k)
		}
	})
}

// TestIllegalPrefixWorks: core.New refuses a prefix memcached could not
// take, so a Limiter never builds such a key; a caller that builds a
// store.Key itself (too long, with spaces and a newline) still gets a working
// key, and namespaces that differ only at their end keep states of their own.
func TestIllegalPrefixWorks(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 1, Window: time.Hour}
	base := strings.Repeat("a long prefix with spaces ", 20) + uniqueKey(t).Identity + "\n"
	if _, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: newStore(t, nil, firstServer(t)), Prefix: base}); err == nil {
		t.Fatal("core.New accepted a prefix with spaces and a newline")
	}
	s := newStore(t, nil, firstServer(t))
	ctx := context.Background()
	keys := []store.Key{{Namespace: base + "1", Identity: "id"}, {Namespace: base + "2", Identity: "id"}}
	for i, k := range keys {
		t.Cleanup(func() { _ = s.Delete(ctx, k) })
		if err := s.Update(ctx, k, put(fmt.Sprint("state-", i), time.Hour)); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	for i, k := range keys {
		var got []byte
		if err := s.Update(ctx, k, mutationFunc(func(state []byte) ([]byte, time.Duration) {
			got = append(got[:0], state...)
			return nil, 0
		})); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if want := fmt.Sprint("state-", i); string(got) != want {
			t.Fatalf("key %d holds %q, want %q: namespaces that differ at their end share a key", i, got, want)
		}
	}
}
