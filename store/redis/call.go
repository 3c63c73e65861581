package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/store"
)

// call is one script decision on its way to the server. Its arguments are
// boxed once, as pointers into the call itself, so that building a command
// allocates nothing but the command: go-redis writes *int64, *uint64 and
// *string arguments as it writes their values. Calls are pooled.
type call struct {
	argv   [4 + store.NumScriptArgs]any
	fields [store.NumScriptArgs]any // a pointer to each field of a, by store.ScriptArg
	key    string
	a      store.ScriptArgs
	sc     *store.Script
	cmd    *goredis.Cmd

	bc  batch.Call // the batcher's part
	err error      // the command's error, once it went out through the batcher
}

var callPool = sync.Pool{New: func() any {
	c := &call{bc: batch.NewCall()}
	// argv[0] and argv[1] (EVALSHA and the hash, or EVAL and the source)
	// are set per call, and so is ARGV (argv[4:]), from fields, as the
	// script declares. The key count is a string: a cluster client reads it
	// as one to find the key.
	c.argv[2] = "1"
	c.argv[3] = &c.key
	c.fields = [...]any{
		store.ArgNow: &c.a.Now, store.ArgN: &c.a.N, store.ArgLimit: &c.a.Limit, store.ArgWindow: &c.a.Window,
		store.ArgBurst: &c.a.Burst, store.ArgInterval: &c.a.Interval, store.ArgMaxDelay: &c.a.MaxDelay,
		store.ArgLeaseTTL: &c.a.LeaseTTL,
		store.ArgLease:    &c.a.Lease, // written in decimal, as the convention asks
		store.ArgOp:       &c.a.Op,
	}
	return c
}}

func getCall(s *store.Script, key store.Key, a store.ScriptArgs) *call {
	c := callPool.Get().(*call)
	c.key = key.String()
	c.a = a
	c.sc = s
	c.evalsha(s)
	return c
}

// putCall returns c to the pool. Only a call that no batch still holds may
// go back: one abandoned after a batch took it is left to the collector.
func putCall(c *call) {
	c.cmd = nil
	c.sc = nil
	c.argv[1] = nil
	c.err = nil
	c.bc.Reset()
	callPool.Put(c)
}

// evalsha points c at a fresh EVALSHA command for s.
func (c *call) evalsha(s *store.Script) {
	c.argv[0], c.argv[1] = "evalsha", &s.Hash
	c.cmd = goredis.NewCmd(context.Background(), c.args(s)...)
}

// eval points c at a fresh EVAL command for s: the script's source, after
// the server answered NOSCRIPT.
func (c *call) eval(s *store.Script) {
	c.argv[0], c.argv[1] = "eval", &s.Source
	c.cmd = goredis.NewCmd(context.Background(), c.args(s)...)
}

// args fills ARGV with the fields this call of s sends (s.ArgsFor) and
// returns the command's arguments.
func (c *call) args(s *store.Script) []any {
	args := s.ArgsFor(&c.a)
	for i, f := range args {
		c.argv[4+i] = c.fields[f]
	}
	return c.argv[:4+len(args)]
}

// result reads the reply of c's command: six integers, or one that the
// script decodes.
func (c *call) result() (store.ScriptResult, error) {
	v, err := c.cmd.Result()
	if err != nil {
		return store.ScriptResult{}, err
	}
	var buf [len(store.ScriptResult{})]int64
	var ints []int64
	switch v := v.(type) {
	case int64:
		ints = append(buf[:0], v)
	case []any:
		if len(v) > len(buf) {
			return store.ScriptResult{}, errReplyShape(len(v))
		}
		ints = buf[:0]
		for _, x := range v {
			n, ok := x.(int64)
			if !ok {
				return store.ScriptResult{}, errReplyShape(len(v))
			}
			ints = append(ints, n)
		}
	default:
		return store.ScriptResult{}, errReplyShape(0)
	}
	r, err := c.sc.Result(ints, &c.a)
	if err != nil {
		return r, errReplyShape(len(ints))
	}
	return r, nil
}
