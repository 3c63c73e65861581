package memory

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

func TestKeyHash(t *testing.T) {
	h := newKeyHasher()
	k := store.Key{Namespace: "sluice:api", Identity: "203.0.113.7"}
	if h.hash(k) != h.hash(store.Key{Namespace: "sluice:" + "api", Identity: "203.0.113." + "7"}) {
		t.Fatal("one key hashed twice gave two map keys")
	}
	if a := h.hash(k); a.h0 == a.h1 {
		t.Errorf("the two halves of %x are equal: the seeds are not independent", a)
	}
	other := newKeyHasher()
	if h.hash(k) == other.hash(k) {
		t.Error("two stores hash a key alike: the seeds are not per store")
	}
	// The boundary between Namespace and Identity is hashed.
	for _, p := range [][2]store.Key{
		{{Namespace: "a:b", Identity: "c"}, {Namespace: "a", Identity: "b:c"}},
		{{Namespace: "ab", Identity: ""}, {Namespace: "a", Identity: "b"}},
		{{Namespace: "a\x00", Identity: "b"}, {Namespace: "a", Identity: "\x00b"}},
	} {
		if h.hash(p[0]) == h.hash(p[1]) {
			t.Errorf("%q/%q and %q/%q hash alike", p[0].Namespace, p[0].Identity, p[1].Namespace, p[1].Identity)
		}
	}
}

// The store keeps a hash of the identity, never the identity itself: a huge
// attacker-chosen identity is garbage once the call returns.
func TestIdentityIsNotKept(t *testing.T) {
	s := newStore(t, nil)
	freed := make(chan struct{})
	func() {
		b := []byte(strings.Repeat("x", 1<<20))
		runtime.AddCleanup(&b[0], func(ch chan struct{}) { close(ch) }, freed)
		id := unsafe.String(&b[0], len(b))
		write(t, s, store.Key{Namespace: "test:p", Identity: id}, []byte{1}, time.Hour)
		if err := s.Delete(context.Background(), key("unrelated")); err != nil {
			t.Fatal(err)
		}
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-freed:
			if n := s.Len(); n != 1 {
				t.Fatalf("Len = %d, want 1", n)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("a 1 MiB identity is still reachable after the store wrote its key")
}

// Bind's fast path and Update address one key: what Take writes, Update
// reads and Delete deletes, in the namespace it was bound to and no other.
func TestBindSharesUpdatesKeys(t *testing.T) {
	s := newStore(t, &Options{SweepInterval: -1})
	p := core.PerMinute("p", 2)
	tk := s.Bind("test:p")
	now := time.Now().UnixMicro()
	for i, want := range []bool{true, true, false} {
		d, err := tk.Take("a", counter{}, now, 1, &p)
		if err != nil || d.Allowed != want {
			t.Fatalf("Take %d: %+v, %v; want Allowed %v", i, d, err, want)
		}
	}
	got := read(t, s, key("a"))
	want, _, _ := counter{}.Step(nil, now, 2, &p)
	if string(got) != string(want) {
		t.Fatalf("Update reads %x where Take wrote %x", got, want)
	}
	if st := read(t, s, store.Key{Namespace: "test:q", Identity: "a"}); st != nil {
		t.Fatalf("another namespace reads %x", st)
	}
	if err := s.Delete(context.Background(), key("a")); err != nil {
		t.Fatal(err)
	}
	if d, err := tk.Take("a", counter{}, now, 1, &p); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after Delete: %+v, %v; want a fresh key", d, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Take("a", counter{}, now, 1, &p); !errors.Is(err, ErrClosed) {
		t.Fatalf("Take after Close: %v, want ErrClosed", err)
	}
}
