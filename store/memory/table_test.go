package memory

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// tableKey makes a key whose home slot is one of a few, so that runs form,
// deletions shift them, and (with homes at the table's last slots) runs wrap
// around the end: home, of 2²⁰, is the fraction of the table where its probe
// starts, and the identity sits in the low bits.
func tableKey(id int, home uint64) slotKey {
	return slotKey{home<<44 | uint64(id), uint32(id)}
}

var tableHomes = []uint64{0, 1, 2, 3, 5, 8, 13, 21, 1<<20 - 1, 1<<20 - 2, 1<<20 - 4, 1<<20 - 7, 1<<20 - 11}

type modelEntry struct {
	state   []byte
	expires int64
}

// checkTable compares t with the model and checks the probing invariant:
// every key sits in an unbroken run of used slots from its home.
func checkTable(t *testing.T, tb *table, model map[slotKey]modelEntry) {
	t.Helper()
	if tb.count != len(model) {
		t.Fatalf("count %d, model holds %d", tb.count, len(model))
	}
	// empty[j] counts the empty slots before j.
	empty := make([]int, len(tb.slots)+1)
	for i := range tb.slots {
		empty[i+1] = empty[i]
		if s := &tb.slots[i]; !s.used() {
			empty[i+1]++
			if *s != (slot{}) {
				t.Fatalf("slot %d is empty but not zero: %+v", i, *s)
			}
		}
	}
	used := 0
	for i := range tb.slots {
		s := &tb.slots[i]
		if !s.used() {
			continue
		}
		used++
		home := tb.home(s.hi)
		gaps := empty[i] - empty[home]
		if home > i {
			gaps = empty[len(tb.slots)] - empty[home] + empty[i]
		}
		if gaps != 0 {
			t.Fatalf("key in slot %d is cut off from its home %d by %d empty slots", i, home, gaps)
		}
	}
	if used != len(model) {
		t.Fatalf("%d used slots, model holds %d", used, len(model))
	}
	if tb.slots != nil && tb.count*4 > len(tb.slots)*3 {
		t.Fatalf("load %d/%d above 3/4", tb.count, len(tb.slots))
	}
	for k, want := range model {
		s := tb.find(k)
		if s == nil {
			t.Fatalf("key %x lost", k)
		}
		if !bytes.Equal(tb.state(s), want.state) || s.expires != want.expires {
			t.Fatalf("key %x: state %v expiring %d, want %v expiring %d", k, tb.state(s), s.expires, want.state, want.expires)
		}
	}
}

func TestTableAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	model := map[slotKey]modelEntry{}
	ids := 0
	var keys []slotKey
	for step := range 3_000 {
		switch op := rng.IntN(12); {
		case op < 4 && len(model) < 300: // insert a new key
			k := tableKey(ids, tableHomes[rng.IntN(len(tableHomes))])
			ids++
			s := tb.insert(k)
			st := bytes.Repeat([]byte{byte(step)}, rng.IntN(40))
			tb.setState(s, st)
			s.expires = int64(rng.IntN(100))
			model[k] = modelEntry{append([]byte(nil), st...), s.expires}
			keys = append(keys, k)
		case op < 6 && len(keys) > 0: // update a key's state, in place when it can
			k := keys[rng.IntN(len(keys))]
			s := tb.find(k)
			if _, ok := model[k]; !ok {
				if s != nil {
					t.Fatalf("step %d: deleted key %x found", step, k)
				}
				continue
			}
			next := tb.state(s)
			switch rng.IntN(3) {
			case 0: // rewrite in place, maybe growing within capacity
				next = append(next[:0], bytes.Repeat([]byte{byte(step)}, rng.IntN(cap(next)+1))...)
			case 1: // a new array, of any length
				next = bytes.Repeat([]byte{byte(step)}, rng.IntN(80))
			case 2: // a tail of the same array
				if len(next) > 0 {
					next = next[rng.IntN(len(next)):]
				}
			}
			want := append([]byte(nil), next...)
			tb.setState(s, next)
			model[k] = modelEntry{want, model[k].expires}
		case op < 8 && len(keys) > 0: // remove a key, present or not
			k := keys[rng.IntN(len(keys))]
			tb.remove(k)
			delete(model, k)
		case op == 10 && tb.count > 0: // evict one key
			before := tb.count
			expires := tb.evict()
			var gone []slotKey
			for k, e := range model {
				if tb.find(k) == nil {
					gone = append(gone, k)
					if e.expires != expires {
						t.Fatalf("step %d: evicted a key expiring at %d, evict said %d", step, e.expires, expires)
					}
				}
			}
			if len(gone) != 1 || tb.count != before-1 {
				t.Fatalf("step %d: evict removed %d keys (count %d -> %d), want 1", step, len(gone), before, tb.count)
			}
			delete(model, gone[0])
		case op == 11: // reclaim from the hand
			now := int64(rng.IntN(60))
			removed := tb.reclaim(now, reclaimSteps)
			n := 0
			for k, e := range model {
				if tb.find(k) == nil {
					if now < e.expires {
						t.Fatalf("step %d: reclaim at %d deleted a key expiring at %d", step, now, e.expires)
					}
					delete(model, k)
					n++
				}
			}
			if n != removed || removed > reclaimSteps {
				t.Fatalf("step %d: reclaim said %d removed, %d are gone (at most %d)", step, removed, n, reclaimSteps)
			}
		case op < 9: // sweep
			now := int64(rng.IntN(60))
			wantRemoved, wantNext := 0, int64(1<<63-1)
			for k, e := range model {
				if now >= e.expires {
					delete(model, k)
					wantRemoved++
				} else if e.expires < wantNext {
					wantNext = e.expires
				}
			}
			removed, next := tb.sweep(now)
			if removed != wantRemoved || next != wantNext {
				t.Fatalf("step %d: sweep at %d removed %d, next %d; want %d, %d", step, now, removed, next, wantRemoved, wantNext)
			}
			for i := range 50 { // keep the keys coming back
				k := tableKey(ids, tableHomes[i%len(tableHomes)])
				ids++
				s := tb.insert(k)
				tb.setState(s, []byte{byte(i)})
				s.expires = int64(rng.IntN(100))
				model[k] = modelEntry{[]byte{byte(i)}, s.expires}
				keys = append(keys, k)
			}
		}
		if step%100 == 0 {
			checkTable(t, &tb, model)
		} else if tb.count != len(model) {
			t.Fatalf("step %d: count %d, model holds %d", step, tb.count, len(model))
		}
	}
	checkTable(t, &tb, model)
}

func TestSlotState(t *testing.T) {
	tb := &table{}
	s := tb.insert(slotKey{1, 2})
	tb.setState(s, []byte{})
	if st := tb.state(s); st == nil || len(st) != 0 {
		t.Fatalf("empty state reads %v, want empty and not nil", st)
	}
	tb.setState(s, []byte{1, 2, 3})
	st := tb.state(s)
	if cap(st) != inlineCap || &st[:1][0] != &s.inline[0] {
		t.Fatalf("inline state not handed out in place with its capacity")
	}
	st = append(st, 4) // grows within the slot
	tb.setState(s, st)
	if !bytes.Equal(tb.state(s), []byte{1, 2, 3, 4}) || s.meta&slotLong != 0 {
		t.Fatalf("state %v (long %v), want [1 2 3 4] inline", tb.state(s), s.meta&slotLong != 0)
	}
	long := bytes.Repeat([]byte{7}, inlineCap+1)
	tb.setState(s, long)
	if s.meta&slotLong == 0 || &tb.state(s)[0] != &long[0] {
		t.Fatalf("a long state is not kept as it is")
	}
	tb.setState(s, tb.state(s)[inlineCap-2:]) // 3 bytes of the long array
	if !bytes.Equal(tb.state(s), []byte{7, 7, 7}) || s.meta&slotLong != 0 || len(tb.long) != 0 {
		t.Fatalf("state %v (long %v, %d held), want [7 7 7] inline", tb.state(s), s.meta&slotLong != 0, len(tb.long))
	}
	tb.setState(s, tb.state(s)[1:]) // a tail of the inline array itself
	if !bytes.Equal(tb.state(s), []byte{7, 7}) {
		t.Fatalf("state %v, want [7 7]", tb.state(s))
	}
}

// A long state lives in the table's side map only while its key does:
// deleting, evicting, reclaiming or sweeping the key drops it.
func TestLongStatesLeaveWithTheirKeys(t *testing.T) {
	long := bytes.Repeat([]byte{7}, inlineCap+1)
	for _, c := range []struct {
		name string
		drop func(tb *table, k slotKey)
	}{
		{"remove", func(tb *table, k slotKey) { tb.remove(k) }},
		{"evict", func(tb *table, _ slotKey) { tb.evict() }},
		{"reclaim", func(tb *table, _ slotKey) { tb.reclaim(10, reclaimSteps) }},
		{"sweep", func(tb *table, _ slotKey) { tb.sweep(10) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &table{}
			k := slotKey{1 << 63, 3}
			s := tb.insert(k)
			tb.setState(s, long)
			s.expires = 5
			c.drop(tb, k)
			if tb.find(k) != nil || len(tb.long) != 0 {
				t.Fatalf("after %s: key found %v, %d long states held; want neither", c.name, tb.find(k) != nil, len(tb.long))
			}
		})
	}
}

// A table of any length keeps its keys: growth by half from minSlots gives
// lengths that are not powers of two, and every key is found after each.
func TestTableGrowsByHalf(t *testing.T) {
	tb := &table{}
	var keys []slotKey
	lengths := map[int]bool{}
	for i := range 1000 {
		k := slotKey{uint64(i) * 0x9e3779b97f4a7c15, uint32(i)}
		tb.insert(k)
		keys = append(keys, k)
		lengths[len(tb.slots)] = true
		if tb.count*2 < len(tb.slots) && len(tb.slots) > minSlots {
			t.Fatalf("%d keys in %d slots: below half full after growth", tb.count, len(tb.slots))
		}
	}
	for _, k := range keys {
		if tb.find(k) == nil {
			t.Fatalf("key %x lost", k)
		}
	}
	for _, n := range []int{8, 12, 18, 27, 40} {
		if !lengths[n] {
			t.Fatalf("lengths %v: no table of %d slots", lengths, n)
		}
	}
}
