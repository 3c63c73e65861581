package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// closeAt is the demo's stdout: it runs f once the output says when.
type closeAt struct {
	bytes.Buffer
	when string
	f    func()
	done bool
}

func (w *closeAt) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if !w.done && strings.Contains(w.String(), w.when) {
		w.done = true
		w.f()
	}
	return n, err
}

// A store that goes away during the demo is unreachable (exit 3): the demo
// says the store failed, with its error, and blames no algorithm for
// counts the store did not decide.
func TestDemoStoreLostMidRun(t *testing.T) {
	r := testenv.StartRedis(t)
	// Gone while part one waits out the window: SIGKILLed then.
	out := &closeAt{when: "for the window", f: r.Stop}
	var errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, []string{"demo", "--store", "redis://" + r.Addr, "--window", "1s", "--requests", "40"}, out, &errOut)
	wantCode(t, code, exitUnreachable, out.String(), errOut.String())
	if !strings.Contains(errOut.String(), "the store stopped answering during the demo") || !strings.Contains(errOut.String(), "sluice: store ") {
		t.Errorf("stderr does not say the store stopped answering, with its error:\n%s", errOut.String())
	}
	for _, blame := range []string{"FAIL", "WRONG", "NOT admitted", "promises"} {
		if strings.Contains(out.String()+errOut.String(), blame) {
			t.Errorf("the output says %q of a store that failed:\nstdout:\n%s\nstderr:\n%s", blame, out.String(), errOut.String())
		}
	}
}

// A store that answers but refuses the decisions (an ACL's NOPERM) failed
// the demo (exit 1), as it fails bench: it is not unreachable. The demo
// says so, and blames no algorithm either.
func TestDemoStoreThatRefusesFails(t *testing.T) {
	addr := testenv.RedisAddr(t)
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { admin.Close() })
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "sluice-demo-noperm", "on", ">pw", "+@connection", "~*").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", "sluice-demo-noperm") })
	code, out, errOut := sluice(t, "demo", "--store", "redis://sluice-demo-noperm:pw@"+addr, "--window", "1s")
	wantCode(t, code, exitFailed, out, errOut)
	if !strings.Contains(errOut, "the store failed the demo's decisions") || !strings.Contains(errOut, "NOPERM") {
		t.Errorf("stderr does not say the store refused the decisions, with its error:\n%s", errOut)
	}
	if strings.Contains(out, "FAIL: a count was not what the algorithm promises") || strings.Contains(out, "WRONG") {
		t.Errorf("an algorithm is blamed for the store's refusal:\n%s", out)
	}
}

// forgetfulStore decides every call on an empty state and keeps nothing:
// a store that answers every call, and whose counts break every promise.
type forgetfulStore struct{}

func (forgetfulStore) Update(_ context.Context, _ store.Key, m store.Mutation) error {
	m.Apply(nil)
	return nil
}

// Counts that break a promise on a store that answers are the demo's
// failure (exit 1), with its FAIL line.
func TestDemoBrokenPromiseFails(t *testing.T) {
	b := &backend{Name: "forgetful", NewStore: func() (store.Store, func(), error) { return forgetfulStore{}, func() {}, nil }, Close: func() {}}
	var out bytes.Buffer
	d := &demo{b: b, p: core.Policy{Name: "demo", Limit: 5, Window: 100 * time.Millisecond}, requests: 20, prefix: "sluice-demo-test", out: &out}
	err := d.run(context.Background(), "memory", algorithm.SlidingLog{})
	if !errors.Is(err, errFailed) {
		t.Fatalf("run: %v, want errFailed\n%s", err, out.String())
	}
	for _, want := range []string{"WRONG: want 5..5", "FAIL: a count was not what the algorithm promises"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A tenant's request the store could not decide is answered 503, which the
// demo's third part says is the store's doing, not a limit's refusal.
func TestDemoTiersStoreFailed(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	s := failingStore{memory.New(nil), &fail}
	b := &backend{Name: "failing", NewStore: func() (store.Store, func(), error) { return s, func() {}, nil }, Close: func() {}}
	var out bytes.Buffer
	d := &demo{b: b, prefix: "sluice-demo-test", out: &out}
	ok, err := d.tiers(context.Background())
	if err != nil || ok {
		t.Fatalf("tiers: %v, %v; want a part that failed, and no error of its own\n%s", ok, err, out.String())
	}
	if !strings.Contains(out.String(), "503 Service Unavailable") || !strings.Contains(out.String(), "the store could not decide") {
		t.Errorf("the 503 is not put down to the store:\n%s", out.String())
	}
	if strings.Contains(out.String(), "refused by the daily limit") || strings.Contains(out.String(), "FAIL") {
		t.Errorf("a 503 is described as a limit's refusal:\n%s", out.String())
	}
	if !errors.Is(d.storeFailure(), store.ErrUnavailable) {
		t.Errorf("the store's failure was not noted: %v", d.storeFailure())
	}
}
