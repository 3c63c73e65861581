package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
)

// call is one script decision on its way to the server. Its arguments are
// boxed once, as pointers into the call itself, so that building a command
// allocates nothing but the command: go-redis writes *int64, *uint64 and
// *string arguments as it writes their values. Calls are pooled.
type call struct {
	argv [14]any
	key  string
	a    store.ScriptArgs
	cmd  *goredis.IntSliceCmd

	// The batcher's fields, guarded by its mutex.
	state    uint8 // callQueued, callTaken or callAbandoned
	deadline time.Time
	ready    chan struct{} // receives once the batch that took the call is done
}

const (
	callQueued = iota + 1
	callTaken
	callAbandoned
)

var callPool = sync.Pool{New: func() any {
	c := &call{ready: make(chan struct{}, 1)}
	// ARGV per store.ScriptArgs; argv[0] and argv[1] (EVALSHA and the hash,
	// or EVAL and the source) are set per call. The key count is a string:
	// a cluster client reads it as one to find the key.
	c.argv[2] = "1"
	c.argv[3] = &c.key
	c.argv[4] = &c.a.Now
	c.argv[5] = &c.a.N
	c.argv[6] = &c.a.Limit
	c.argv[7] = &c.a.Window
	c.argv[8] = &c.a.Burst
	c.argv[9] = &c.a.Interval
	c.argv[10] = &c.a.MaxDelay
	c.argv[11] = &c.a.LeaseTTL
	c.argv[12] = &c.a.Lease // written in decimal, as the convention asks
	c.argv[13] = &c.a.Op
	return c
}}

func getCall(s *store.Script, key store.Key, a store.ScriptArgs) *call {
	c := callPool.Get().(*call)
	c.key = key.String()
	c.a = a
	c.evalsha(s)
	return c
}

// putCall returns c to the pool. Only a call that no batch still holds may
// go back: one abandoned after a batch took it is left to the collector.
func putCall(c *call) {
	c.cmd = nil
	c.argv[1] = nil
	c.state = 0
	callPool.Put(c)
}

// evalsha points c at a fresh EVALSHA command for s.
func (c *call) evalsha(s *store.Script) {
	c.argv[0], c.argv[1] = "evalsha", &s.Hash
	c.cmd = goredis.NewIntSliceCmd(context.Background(), c.argv[:]...)
}

// eval points c at a fresh EVAL command for s: the script's source, after
// the server answered NOSCRIPT.
func (c *call) eval(s *store.Script) {
	c.argv[0], c.argv[1] = "eval", &s.Source
	c.cmd = goredis.NewIntSliceCmd(context.Background(), c.argv[:]...)
}

// result reads the reply of c's command.
func (c *call) result() (store.ScriptResult, error) {
	var r store.ScriptResult
	v, err := c.cmd.Result()
	if err != nil {
		return r, err
	}
	if len(v) != len(r) {
		return r, errReplyShape(len(v))
	}
	copy(r[:], v)
	return r, nil
}
