package ctxend

import (
	"context"
	"errors"
	"testing"
	"time"
)

type key struct{}

func TestEarly(t *testing.T) {
	bg := context.Background()
	dl, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"Background", bg, false},
		{"a value", context.WithValue(bg, key{}, 1), false},
		{"a timeout", dl, true},
		{"marked", DeadlineOnly(dl), false},
		{"a value on the marked", context.WithValue(DeadlineOnly(dl), key{}, 1), false},
	} {
		if got := Early(tc.ctx); got != tc.want {
			t.Errorf("%s: Early %v; want %v", tc.name, got, tc.want)
		}
	}
}

// f stands for a client that sees only its context's deadline: it returns
// at the deadline, or when released.
func slow(ctx context.Context, release <-chan struct{}) func() (int, error) {
	return func() (int, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Hour)
		}
		select {
		case <-release:
			return 1, nil
		case <-time.After(time.Until(dl)):
			return 0, errors.New("i/o timeout")
		}
	}
}

func TestRunReturnsAtACancellation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err, ended := Run(ctx, slow(ctx, nil))
	if !ended || err != nil || time.Since(start) > time.Second {
		t.Fatalf("ended %v, err %v after %v; want ended at the cancellation", ended, err, time.Since(start))
	}
}

func TestRunWaitsForTheClientAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err, ended := Run(ctx, slow(ctx, nil))
	if ended || err == nil || err.Error() != "i/o timeout" {
		t.Fatalf("ended %v, err %v; want the client's own error at the deadline", ended, err)
	}
	release := make(chan struct{})
	close(release)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if v, err, ended := Run(ctx, slow(ctx, release)); v != 1 || err != nil || ended {
		t.Fatalf("%d, %v, ended %v; want f's answer", v, err, ended)
	}
}
