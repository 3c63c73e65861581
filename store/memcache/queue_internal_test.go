package memcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestQueueTakesTurns: callers of one key hold it one at a time, callers of
// other keys do not wait for them, and no key is left behind.
func TestQueueTakesTurns(t *testing.T) {
	q := newQueue()
	ctx := context.Background()
	var held [3]atomic.Int32
	var wg sync.WaitGroup
	for g := range 60 {
		wg.Go(func() {
			k := g % len(held)
			key := string(rune('a' + k))
			for range 200 {
				turn, err := q.wait(ctx, key)
				if err != nil {
					t.Errorf("wait: %v", err)
					return
				}
				if n := held[k].Add(1); n != 1 {
					t.Errorf("key %s held by %d callers at once", key, n)
				}
				held[k].Add(-1)
				q.done(turn)
			}
		})
	}
	wg.Wait()
	if n := q.keys(); n != 0 {
		t.Errorf("%d keys left in the queue", n)
	}
}

// TestQueueDeadline: a caller whose context ends while it waits leaves
// without a turn, and the key's turns go on without it.
func TestQueueDeadline(t *testing.T) {
	q := newQueue()
	first, err := q.wait(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := q.wait(ctx, "k")
		gaveUp <- err
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a cancelled context: got %v, want context.Canceled", err)
	}
	q.done(first)
	next, err := q.wait(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	q.done(next)
	if n := q.keys(); n != 0 {
		t.Errorf("%d keys left in the queue", n)
	}
}

// keys counts the keys the queue holds.
func (q *queue) keys() int {
	n := 0
	for i := range q.shards {
		q.shards[i].mu.Lock()
		n += len(q.shards[i].m)
		q.shards[i].mu.Unlock()
	}
	return n
}
