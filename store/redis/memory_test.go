package redis

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// maxKeyBytes is the MEMORY USAGE that the fixed window, the sliding
// counter, the token bucket and GCRA promise for one key.
const maxKeyBytes = 100

// TestMemoryUsage makes a few decisions per algorithm through the store and
// reads MEMORY USAGE of the key, with the default prefix and policy names
// of 2, 12 and 17 characters (keys of 28, 38 and 43 bytes). Redis
// allocates a key name of up to 30 bytes in a smaller size class than one
// of up to 46 (16 bytes less: 72 bytes a key against 88), so the four
// compact algorithms must stay within maxKeyBytes with keys of up to 46
// bytes; every figure is logged with its key's length.
func TestMemoryUsage(t *testing.T) {
	s := newStore(t, nil)
	admin := userClient(t)
	bounded := map[string]bool{"fixed-window": true, "sliding-counter": true, "token-bucket": true, "gcra": true}
	for _, name := range []string{"ip", "login-per-ip", "login-per-account"} {
		p := core.Policy{Name: name, Limit: 100, Window: time.Minute}
		for _, alg := range scriptedAlgorithms() {
			l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s})
			if err != nil {
				t.Fatal(err)
			}
			id := "203.0.113.7"
			key := l.Key(id).String()
			admin.Del(ctxT(t), key)
			t.Cleanup(func() { admin.Del(ctxT(t), key) })
			for range 5 {
				if _, ok := alg.(core.Leaser); ok {
					_, _, err = l.Acquire(ctxT(t), id)
				} else {
					_, err = l.Allow(ctxT(t), id)
				}
				if err != nil {
					t.Fatalf("%s: %v", alg.Name(), err)
				}
			}
			n, err := admin.MemoryUsage(ctxT(t), key).Result()
			if err != nil {
				t.Fatalf("%s: MEMORY USAGE %s: %v", alg.Name(), key, err)
			}
			t.Logf("%-16s %2d-byte key: MEMORY USAGE %3d bytes after 5 decisions", alg.Name(), len(key), n)
			if len(key) <= 44 && bounded[alg.Name()] && n > maxKeyBytes {
				t.Errorf("%s: MEMORY USAGE %d bytes with the %d-byte key %q, want at most %d", alg.Name(), n, len(key), key, maxKeyBytes)
			}
		}
	}
}
