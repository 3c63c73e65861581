package memcache_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
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
	for _, tc := range []struct {
		prefix string
		asIs   bool // the key is core's own, unchanged
	}{
		{core.DefaultPrefix, true},
		{"tenant-42.api", true},
		{"ünïcode", true}, // bytes above 0x7f are legal
		{strings.Repeat("x", 160), true},
		{strings.Repeat("x", 161), false}, // 251 bytes with the longest policy name
		{strings.Repeat("x", 10_000), false},
		{"with space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"", true},
	} {
		key := core.Key{Namespace: core.Namespace(tc.prefix, longest), Identity: "client 1\r\n"}
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
	a := core.Key{Namespace: strings.Repeat("x", 300) + "a:p", Identity: "id"}
	b := core.Key{Namespace: strings.Repeat("x", 300) + "b:p", Identity: "id"}
	c := core.Key{Namespace: a.Namespace, Identity: "other"}
	if ka, kb, kc := memcache.Key(a), memcache.Key(b), memcache.Key(c); ka == kb || ka == kc {
		t.Errorf("keys %q, %q, %q: two of them are equal", ka, kb, kc)
	}
}

func FuzzKey(f *testing.F) {
	f.Add("sluice", "api", "id")
	f.Add(strings.Repeat(" ", 300), "p", "")
	f.Add("\x00\x01", "x", "\xff")
	f.Fuzz(func(t *testing.T, prefix, policy, identity string) {
		if k := memcache.Key(core.Key{Namespace: core.Namespace(prefix, policy), Identity: identity}); !legal(k) {
			t.Fatalf("Key(%q, %q, %q) = %q: not a legal memcached key", prefix, policy, identity, k)
		}
	})
}

// TestIllegalPrefixWorks: a Limiter whose prefix memcached could not take as
// it is (too long, with spaces and a newline) still decides, and a prefix
// that differs only at its end keeps counters of its own.
func TestIllegalPrefixWorks(t *testing.T) {
	s := newStore(t, nil, firstServer(t))
	p := core.Policy{Name: "p", Limit: 1, Window: time.Hour}
	base := strings.Repeat("a long prefix with spaces ", 20) + uniqueKey(t).Identity + "\n"
	var ls []*core.Limiter
	for _, suffix := range []string{"1", "2"} {
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: s, Prefix: base + suffix})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	ctx := context.Background()
	for i, l := range ls {
		for j, want := range []bool{true, false} {
			d, err := l.Allow(ctx, "id")
			if err != nil {
				t.Fatalf("limiter %d, call %d: %v", i, j, err)
			}
			if d.Allowed != want {
				t.Fatalf("limiter %d, call %d: allowed %v, want %v", i, j, d.Allowed, want)
			}
		}
		if err := l.Reset(ctx, "id"); err != nil {
			t.Fatal(err)
		}
	}
}
