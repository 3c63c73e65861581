package valkey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
)

// TestServerGone: once the server cannot be reached at all, a call fails
// with ErrUnavailable and, since nothing could be sent, a known outcome.
func TestServerGone(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	proxy := newStallProxy(t, addr)
	s := valkey.New(stalledClient(t, proxy, false), nil)
	direct := newClient(t, []string{addr})
	key := freshKey(t, direct)
	p := core.PerSecond("gone", 5)
	args := core.NewScriptArgs(&p, 1, 1)
	if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
		t.Fatal(err)
	}
	proxy.close() // the listener and every connection: redials are refused
	var err error
	// The first call may meet the connection as it breaks (an unknown
	// outcome); once valkey-go knows, it redials and is refused.
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = s.RunScript(ctx, countScript, key, args)
		cancel()
		if err == nil {
			t.Fatal("RunScript succeeded with the server gone")
		}
		if !errors.Is(err, core.ErrOutcomeUnknown) {
			break
		}
	}
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrUnavailable with a known outcome (the dial failed)", err)
	}
	t.Logf("with the server gone: %v", err)
	if n := runs(t, direct, key); n != 1 {
		t.Fatalf("the script ran %d times, want 1 (the warm-up)", n)
	}
}
