package valkey

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/store"
)

// maxCachedPolicies bounds argCache. A process has a handful of policies;
// past the bound, arguments are formatted on every call (correct, slower).
const maxCachedPolicies = 1024

// policyArgs are the six script arguments that come from the Policy alone
// (ARGV[3..8]): the same on every call of one limiter.
type policyArgs [6]int64

// argCache keeps the decimal strings of policy arguments, so that a
// decision formats only what changes per call (now, cost, lease, op), and
// those are usually below 100, which strconv answers without allocating.
// Readers load an immutable map without locking; a miss copies it.
type argCache struct {
	m  atomic.Pointer[map[policyArgs][6]string]
	mu sync.Mutex // serializes writers
}

func (c *argCache) get(a *store.ScriptArgs) [6]string {
	k := policyArgs{a.Limit, a.Window, a.Burst, a.Interval, a.MaxDelay, a.LeaseTTL}
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	var v [6]string
	for i, n := range k {
		v[i] = strconv.FormatInt(n, 10)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedPolicies {
		return v
	}
	next := make(map[policyArgs][6]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

func lenOf(m *map[policyArgs][6]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// argv appends the arguments this call of sc sends (sc.ArgsFor) to out,
// in order.
func (c *argCache) argv(sc *store.Script, a *store.ScriptArgs, out []string) []string {
	p := c.get(a)
	for _, f := range sc.ArgsFor(a) {
		switch f {
		case store.ArgNow:
			out = append(out, strconv.FormatInt(a.Now, 10))
		case store.ArgN:
			out = append(out, strconv.FormatInt(a.N, 10))
		case store.ArgLease:
			out = append(out, strconv.FormatUint(a.Lease, 10))
		case store.ArgOp:
			out = append(out, strconv.FormatInt(a.Op, 10))
		default: // a policy field: ArgLimit .. ArgLeaseTTL
			out = append(out, p[f-store.ArgLimit])
		}
	}
	return out
}
