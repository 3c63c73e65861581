package simulate

import (
	"bytes"
	"image/png"
	"testing"
)

// The pool scenario: the steady tenants get every request through during
// the spike; the spiking one gets its base plus at most its share, and
// some of it from the pool.
func TestPoolScenario(t *testing.T) {
	sc := DefaultPool()
	r, err := RunPool(sc)
	if err != nil {
		t.Fatal(err)
	}
	from, to := int(sc.From/sc.Resolution), int(sc.To/sc.Resolution)
	for i, tn := range sc.Tenants {
		for k := from; k < to; k++ {
			a := r.Admitted[i][k]
			// The spike's first second also spends the full bursts (a
			// bucket of a second's rate each) of its base and its share.
			most := tn.Base + sc.Share + 2
			if k == from {
				most *= 2
			}
			switch {
			case tn.Spike == 0 && a != r.Offered[i][k]:
				t.Errorf("%s (steady) at %ds: %d of %d admitted during another tenant's spike", tn.Name, k, a, r.Offered[i][k])
			case tn.Spike > 0 && (a > most || a < tn.Base):
				t.Errorf("%s (spiking) at %ds: %d admitted, want between its base %d and base + share %d", tn.Name, k, a, tn.Base, tn.Base+sc.Share)
			}
		}
	}
	var pooled int64
	for _, p := range r.Pooled[1] {
		pooled += p
	}
	if pooled == 0 {
		t.Error("the spiking tenant drew nothing from the pool")
	}
	var buf bytes.Buffer
	if err := WritePoolPNG(&buf, r, sc); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if w, h := PoolPlotSize(); img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Errorf("PNG %v, want %dx%d", img.Bounds(), w, h)
	}
}
