package conformance

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing the
// test, so that the suite's own tests can require a check to fail. The
// embedded TB (the real test) provides the rest: Name, Cleanup, Context,
// Helper, Log.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
}

func (r *recorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, msg)
}

func (r *recorder) Fail()                             { r.add("Fail") }
func (r *recorder) Error(args ...any)                 { r.add(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }
func (r *recorder) FailNow()                          { r.add("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.add(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.add(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) SkipNow()                         { r.skip(); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                 { r.skip(); runtime.Goexit() }
func (r *recorder) Skipf(format string, args ...any) { r.skip(); runtime.Goexit() }
func (r *recorder) Skipped() bool                    { r.mu.Lock(); defer r.mu.Unlock(); return r.skipped }
func (r *recorder) skip()                            { r.mu.Lock(); defer r.mu.Unlock(); r.skipped = true }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// record runs fn on its own goroutine (so that Fatal can end it) with a
// recorder, and returns the recorder when fn is done.
func record(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// TestRecorder checks the recorder itself: a check that fails is seen to
// fail, from any goroutine and through Fatal; one that passes is not.
func TestRecorder(t *testing.T) {
	if r := record(t, func(tb testing.TB) {}); r.Failed() {
		t.Errorf("an empty check failed: %s", r)
	}
	r := record(t, func(tb testing.TB) {
		var wg sync.WaitGroup
		wg.Go(func() { tb.Errorf("from a goroutine") })
		wg.Wait()
		tb.Fatalf("fatal")
		tb.Errorf("after Fatal") // never runs
	})
	if !r.Failed() || r.String() != "from a goroutine\nfatal" {
		t.Errorf("recorded %q, want the goroutine's error and the fatal one", r)
	}
}
