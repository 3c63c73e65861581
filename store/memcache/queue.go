package memcache

import (
	"context"
	"hash/maphash"
	"sync"
)

// queue lets concurrent Updates of one key through one Store take turns,
// in arrival order, instead of racing each other to the server: N callers
// racing on one key make N gets and N cas for one success, and most of them
// retry. Across Stores (other processes) the compare-and-swap loop still
// decides; the queue only removes the conflicts a process would have with
// itself. Keys are queued one by one (not in stripes), so unrelated keys
// never wait for each other.
type queue struct {
	seed   maphash.Seed
	shards [queueShards]queueShard
	turns  sync.Pool
}

const queueShards = 64

type queueShard struct {
	mu sync.Mutex
	m  map[string]*turn
}

// turn is one key's queue: a token (the channel's one slot) and the number
// of callers holding or waiting for it.
type turn struct {
	token chan struct{}
	refs  int // guarded by sh.mu
	sh    *queueShard
	key   string
}

func newQueue() *queue {
	q := &queue{seed: maphash.MakeSeed()}
	for i := range q.shards {
		q.shards[i].m = make(map[string]*turn)
	}
	q.turns.New = func() any { return &turn{token: make(chan struct{}, 1)} }
	return q
}

// wait returns when it is the caller's turn at key, or with ctx's error (and
// no turn) when ctx ends first. A nil error must be followed by done.
func (q *queue) wait(ctx context.Context, key string) (*turn, error) {
	sh := &q.shards[maphash.String(q.seed, key)%queueShards]
	sh.mu.Lock()
	t := sh.m[key]
	if t == nil {
		t = q.turns.Get().(*turn)
		t.sh, t.key = sh, key
		sh.m[key] = t
	}
	t.refs++
	sh.mu.Unlock()
	select {
	case t.token <- struct{}{}:
		return t, nil
	default:
	}
	// Blocked senders on a channel are served first come, first served.
	select {
	case t.token <- struct{}{}:
		return t, nil
	case <-ctx.Done():
		q.leave(t)
		return nil, ctx.Err()
	}
}

// done passes the key's turn on to the next caller.
func (q *queue) done(t *turn) {
	<-t.token
	q.leave(t)
}

func (q *queue) leave(t *turn) {
	sh := t.sh
	sh.mu.Lock()
	t.refs--
	if t.refs == 0 {
		delete(sh.m, t.key)
		t.sh, t.key = nil, ""
		q.turns.Put(t)
	}
	sh.mu.Unlock()
}
