package nethttp

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A shadow limiter's refusals reach the client as admissions that say
// nothing about them: 200, no Retry-After, and the RateLimit item of an
// exhausted quota (r=0), as the last request the quota admitted has. The
// same limit enforced answers 429.
func TestShadowResponsesSayNothing(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		s := memory.New(nil)
		t.Cleanup(func() { _ = s.Close() })
		l, err := core.New(core.Config{
			Policy:    core.Policy{Name: "dark", Limit: 2, Window: time.Minute},
			Algorithm: algorithm.SlidingLog{}, Store: s, Shadow: shadow,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: l}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for i := range 5 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			refused := i >= 2
			wantCode := http.StatusOK
			if refused && !shadow {
				wantCode = http.StatusTooManyRequests
			}
			if w.Code != wantCode {
				t.Fatalf("shadow %v, request %d: %d; want %d", shadow, i, w.Code, wantCode)
			}
			if !shadow {
				continue
			}
			hd := w.Header()
			if ra := hd.Get("Retry-After"); ra != "" {
				t.Fatalf("request %d of a shadow policy: Retry-After %q", i, ra)
			}
			rl := hd.Get(HeaderRateLimit)
			wantR := fmt.Sprintf("r=%d", max(1-i, 0)) // 2 units: 1 left, then none
			if !strings.HasPrefix(rl, `"dark";`+wantR+";") {
				t.Fatalf("request %d: RateLimit %q; want the item of %s", i, rl, wantR)
			}
		}
	}
}
