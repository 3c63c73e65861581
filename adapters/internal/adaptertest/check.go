package adaptertest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice/adapters/nethttp"
)

// Response is what a test request got back.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends method url with the given header pairs ("Name", "value", ...)
// and reads the whole response. A transport error is returned as status 0,
// with the error text as the body.
func Do(t testing.TB, c *http.Client, method, url string, header ...string) Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Errorf("new request: %v", err)
		return Response{}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return Response{Body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// Item is one member of a RateLimit or RateLimit-Policy list.
type Item struct {
	Name   string
	Params map[string]any
}

// Int returns the Integer parameter k, and whether it is one.
func (it Item) Int(k string) (int64, bool) {
	v, ok := it.Params[k].(int64)
	return v, ok
}

// List parses header field name as a Structured Field List (RFC 9651)
// whose members are Items with a String value, as the draft requires, and
// fails the test when it is not one. An absent field is an empty list.
func List(t testing.TB, h http.Header, name string) []Item {
	t.Helper()
	vals := h.Values(name)
	if len(vals) == 0 {
		return nil
	}
	l, err := httpsfv.UnmarshalList(vals)
	if err != nil {
		t.Errorf("%s %q is not a Structured Field List: %v", name, vals, err)
		return nil
	}
	var items []Item
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Errorf("%s: member %#v is not an Item", name, m)
			continue
		}
		s, ok := it.Value.(string)
		if !ok {
			t.Errorf("%s: item %#v is not a String", name, it.Value)
			continue
		}
		ps := map[string]any{}
		for _, k := range it.Params.Names() {
			ps[k], _ = it.Params.Get(k)
		}
		items = append(items, Item{Name: s, Params: ps})
	}
	return items
}

// Find returns the item named name.
func Find(items []Item, name string) (Item, bool) {
	for _, it := range items {
		if it.Name == name {
			return it, true
		}
	}
	return Item{}, false
}

// CheckFields checks the RateLimit fields of an admitted or denied
// response: every RateLimit item has integer r >= 0 and t >= 0 and names a
// policy of RateLimit-Policy, whose items each have an integer q. It
// returns the RateLimit items.
func CheckFields(t testing.TB, r Response) []Item {
	t.Helper()
	pol := List(t, r.Header, "RateLimit-Policy")
	if len(pol) == 0 {
		t.Errorf("status %d: no RateLimit-Policy", r.Status)
	}
	for _, it := range pol {
		if q, ok := it.Int("q"); !ok || q < 0 {
			t.Errorf("RateLimit-Policy %q: q=%v", it.Name, it.Params["q"])
		}
		if w, ok := it.Params["w"]; ok {
			if w, ok := w.(int64); !ok || w < 1 {
				t.Errorf("RateLimit-Policy %q: w=%v", it.Name, it.Params["w"])
			}
		}
	}
	items := List(t, r.Header, "RateLimit")
	for _, it := range items {
		if _, ok := Find(pol, it.Name); !ok {
			t.Errorf("RateLimit item %q has no RateLimit-Policy item", it.Name)
		}
		if v, ok := it.Int("r"); !ok || v < 0 {
			t.Errorf("RateLimit %q: r=%v", it.Name, it.Params["r"])
		}
		if v, ok := it.Int("t"); !ok || v < 0 {
			t.Errorf("RateLimit %q: t=%v", it.Name, it.Params["t"])
		}
	}
	return items
}

// Problem decodes an RFC 9457 body and checks its media type and status.
func Problem(t testing.TB, r Response) nethttp.Problem {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != nethttp.ContentTypeProblem {
		t.Errorf("status %d: Content-Type %q, want %q", r.Status, ct, nethttp.ContentTypeProblem)
	}
	var pr nethttp.Problem
	if err := json.Unmarshal(r.Body, &pr); err != nil {
		t.Errorf("status %d: body %q is not JSON: %v", r.Status, r.Body, err)
	}
	if pr.Status != r.Status {
		t.Errorf("problem status %d on a %d response", pr.Status, r.Status)
	}
	return pr
}

// CheckDenied checks a 429 from policy: a whole, positive Retry-After no
// earlier than the t of any other rate layer left with r=0 (that layer
// would refuse the retry until its reset), and a quota-exceeded problem
// naming policy. It returns Retry-After in seconds.
func CheckDenied(t testing.TB, r Response, policy string) int64 {
	t.Helper()
	if r.Status != http.StatusTooManyRequests {
		t.Errorf("status %d (%s), want 429", r.Status, r.Body)
		return 0
	}
	ra, err := strconv.ParseInt(r.Header.Get("Retry-After"), 10, 64)
	if err != nil || ra < 1 {
		t.Errorf("Retry-After %q, want whole seconds >= 1", r.Header.Get("Retry-After"))
	}
	pol := List(t, r.Header, "RateLimit-Policy")
	for _, it := range CheckFields(t, r) {
		if it.Name == policy {
			continue // its own reset may come after the time its retry fits
		}
		if p, _ := Find(pol, it.Name); p.Params["qu"] == "concurrent-requests" {
			continue // a refused request's leases are released at once
		}
		if rem, _ := it.Int("r"); rem != 0 {
			continue
		}
		if v, _ := it.Int("t"); v > ra {
			t.Errorf("RateLimit %q: r=0 until t=%d, after Retry-After %d: the retry would be refused", it.Name, v, ra)
		}
	}
	if it, ok := Find(List(t, r.Header, "RateLimit"), policy); !ok {
		t.Errorf("429 has no RateLimit item for the violated policy %q", policy)
	} else if v, _ := it.Int("r"); v != 0 {
		t.Logf("violated policy %q has r=%d (a cost above it)", policy, v)
	}
	pr := Problem(t, r)
	if pr.Type != nethttp.ProblemQuotaExceeded {
		t.Errorf("problem type %q, want %q", pr.Type, nethttp.ProblemQuotaExceeded)
	}
	if len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != policy {
		t.Errorf("violated-policies %q, want [%q]", pr.ViolatedPolicies, policy)
	}
	return ra
}

// CheckUnavailable checks a fail-closed 503 for policy: no Retry-After and
// a temporary-reduced-capacity problem naming policy.
func CheckUnavailable(t testing.TB, r Response, policy string) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable {
		t.Errorf("status %d (%s), want 503", r.Status, r.Body)
		return
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Errorf("503 with Retry-After %q: nobody knows when the store is back", ra)
	}
	pr := Problem(t, r)
	if pr.Type != nethttp.ProblemReducedCapacity {
		t.Errorf("problem type %q, want %q", pr.Type, nethttp.ProblemReducedCapacity)
	}
	if len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != policy {
		t.Errorf("violated-policies %q, want [%q]", pr.ViolatedPolicies, policy)
	}
}
