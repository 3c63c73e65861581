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

// argv fills the ten script arguments of the ScriptArgs convention.
func (c *argCache) argv(a *store.ScriptArgs, out *[10]string) {
	p := c.get(a)
	out[0] = strconv.FormatInt(a.Now, 10)
	out[1] = strconv.FormatInt(a.N, 10)
	copy(out[2:8], p[:])
	out[8] = strconv.FormatUint(a.Lease, 10)
	out[9] = strconv.FormatInt(a.Op, 10)
}
