package receipts_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// Every receipt is refunded and credited to its layer's index with the
// units it got back, the ones past the four a Set holds in place too: a
// layer not credited shows the r of its charge, and holds the retry back
// for its whole window.
func TestRefundGivesBackEveryReceipt(t *testing.T) {
	ctx := context.Background()
	st := memory.New(nil)
	t.Cleanup(func() { _ = st.Close() })
	var set receipts.Set
	var lims []*core.Limiter
	for i := range 6 {
		l, err := core.New(core.Config{Policy: core.Policy{Name: "l" + string(rune('a'+i)), Limit: 10, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		lims = append(lims, l)
		d, rc, err := l.Charge(ctx, "who", 3)
		if err != nil || !d.Allowed || rc == nil {
			t.Fatalf("Charge: %+v, %v, %v", d, rc, err)
		}
		set.Add(rc, 10+i)
	}
	set.Add(nil, 99) // a layer that charged nothing
	credited := map[int]int64{}
	set.Refund(ctx, func(at int, k int64) { credited[at] += k })
	want := map[int]int64{10: 3, 11: 3, 12: 3, 13: 3, 14: 3, 15: 3}
	if len(credited) != len(want) {
		t.Fatalf("credited %v, want %v", credited, want)
	}
	for at, k := range want {
		if credited[at] != k {
			t.Fatalf("credited %v, want %v", credited, want)
		}
	}
	for _, l := range lims {
		if d, err := l.AllowN(ctx, "who", 10); err != nil || !d.Allowed {
			t.Fatalf("%s after the refund: %+v, %v; want its whole quota back", l.Policy().Name, d, err)
		}
	}
}
