package valkey_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
)

// recordScript is a test script: it stores its ten arguments in the hash
// KEYS[1] (fields "1".."10", exactly as received) and replies six integers
// taken from them, so a test can check the calling convention end to end.
var recordScript = store.NewScript("test-record", `
for i = 1, 10 do redis.call('HSET', KEYS[1], tostring(i), ARGV[i]) end
return {1, tonumber(ARGV[3]), tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[10])}
`)

func TestRunScriptArguments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		key := freshKey(t, c)
		p := core.Policy{Name: "args", Limit: 25, Window: 2 * time.Second, Burst: 40, MaxDelay: 3 * time.Second, LeaseTTL: 7 * time.Second}
		args := core.NewScriptArgs(&p, 1_700_000_000_123_456, 3)
		args.Lease = 1<<63 + 12345 // above 2^53 and 2^63: must travel as decimal text
		args.Op = store.OpRelease
		for run := range 2 { // the second run takes the cached policy arguments
			got, err := s.RunScript(context.Background(), recordScript, key, args)
			if err != nil {
				t.Fatalf("run %d: RunScript: %v", run, err)
			}
			want := store.ScriptResult{1, 25, 3, 2_000_000, 40, store.OpRelease}
			if got != want {
				t.Fatalf("run %d: reply %v, want %v", run, got, want)
			}
			fields, err := c.Do(context.Background(), c.B().Hgetall().Key(key.String()).Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			wantArgs := []string{"1700000000123456", "3", "25", "2000000", "40", "80000", "3000000", "7000000",
				strconv.FormatUint(args.Lease, 10), "1"}
			for i, w := range wantArgs {
				if g := fields[strconv.Itoa(i+1)]; g != w {
					t.Errorf("run %d: ARGV[%d] = %q, want %q", run, i+1, g, w)
				}
			}
		}
	})
}

func TestRunScriptServerTimeIsZeroNow(t *testing.T) {
	s, c := newStore(t, backends[0].addrs(t))
	key := freshKey(t, c)
	p := core.PerSecond("now", 5)
	if _, err := s.RunScript(context.Background(), recordScript, key, core.NewScriptArgs(&p, 0, 1)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Do(context.Background(), c.B().Hget().Key(key.String()).Field("1").Build()).ToString()
	if err != nil || got != "0" {
		t.Fatalf("ARGV[1] = %q (%v), want \"0\": the script reads TIME itself", got, err)
	}
}

func TestRunScriptNoScriptFallsBackToEval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		key := freshKey(t, c)
		p := core.PerSecond("noscript", 5)
		for i := range 3 {
			if err := flushScripts(t, c); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RunScript(context.Background(), recordScript, key, core.NewScriptArgs(&p, 1, 1)); err != nil {
				t.Fatalf("run %d after SCRIPT FLUSH: %v", i, err)
			}
			// EVAL loaded it again on the node that holds the key.
			ok, err := c.Do(context.Background(), c.B().ScriptExists().Sha1(recordScript.Hash).Build().SetSlot(key.String())).AsIntSlice()
			if err != nil || len(ok) != 1 || ok[0] != 1 {
				t.Fatalf("SCRIPT EXISTS after the fallback = %v, %v; want [1]", ok, err)
			}
		}
	})
}

func TestRunScriptBadReplies(t *testing.T) {
	s, c := newStore(t, backends[0].addrs(t))
	p := core.PerSecond("bad", 5)
	tests := []struct {
		name, src string
		unknown   bool // the script may have written: the outcome is unknown
	}{
		{"five integers", `redis.call('SET', KEYS[1], 'x') return {1, 2, 3, 4, 5}`, true},
		{"a string", `redis.call('SET', KEYS[1], 'x') return 'x'`, true},
		{"a string element", `return {1, 2, 3, 4, 5, 'six'}`, true},
		{"runtime error after a write", `redis.call('SET', KEYS[1], 'x') return redis.call('INCR', KEYS[1])`, true},
		{"error raised by the script", `return redis.error_reply('no thanks')`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := freshKey(t, c)
			_, err := s.RunScript(context.Background(), store.NewScript("test-bad", tt.src), key, core.NewScriptArgs(&p, 1, 1))
			var se *store.Error
			if !errors.As(err, &se) || !errors.Is(err, core.ErrUnavailable) {
				t.Fatalf("err = %v, want a *store.Error matching ErrUnavailable", err)
			}
			if got := errors.Is(err, core.ErrOutcomeUnknown); got != tt.unknown {
				t.Fatalf("errors.Is(%v, ErrOutcomeUnknown) = %v, want %v", err, got, tt.unknown)
			}
		})
	}
}

// TestRunScriptRefusedCallsSendNothing: a closed store, a store without a
// client and a context that is already done fail with a known outcome, and
// the script does not run.
// Arguments a script's one-integer reply cannot be read with (a zero
// ScriptArgs: no interval) are refused before sending.
func TestRunScriptZeroArgumentsRefused(t *testing.T) {
	c := newClient(t, backends[0].addrs(t))
	s := valkey.New(c, nil)
	key := freshKey(t, c)
	for _, alg := range []interface {
		core.Algorithm
		core.Scripted
	}{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.LeakyBucket{}} {
		if _, err := s.RunScript(context.Background(), alg.Script(), key, store.ScriptArgs{}); !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("%s with zero arguments: %v, want a refusal before sending", alg.Name(), err)
		}
	}
}

func TestRunScriptRefusedCallsSendNothing(t *testing.T) {
	addrs := backends[0].addrs(t)
	c := newClient(t, addrs)
	p := core.PerSecond("refused", 5)
	closed := valkey.New(c, nil)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		s    *valkey.Store
		ctx  context.Context
	}{
		{"closed store", closed, context.Background()},
		{"nil client", valkey.New(nil, nil), context.Background()},
		{"cancelled context", valkey.New(c, nil), cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := freshKey(t, c)
			_, err := tt.s.RunScript(tt.ctx, recordScript, key, core.NewScriptArgs(&p, 1, 1))
			if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want ErrUnavailable with a known outcome", err)
			}
			n, err := c.Do(context.Background(), c.B().Exists().Key(key.String()).Build()).AsInt64()
			if err != nil || n != 0 {
				t.Fatalf("EXISTS = %d, %v: the script ran", n, err)
			}
			if _, err := tt.s.RunScript(context.Background(), nil, key, core.NewScriptArgs(&p, 1, 1)); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("RunScript with a nil script: err = %v, want ErrUnavailable", err)
			}
			if err := tt.s.Update(tt.ctx, key, nil); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("Update: err = %v, want ErrUnavailable", err)
			}
			if err := tt.s.Delete(tt.ctx, key); !errors.Is(err, core.ErrUnavailable) {
				t.Errorf("Delete: err = %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestCloseLeavesClientOpen: the store does not own the client.
func TestCloseLeavesClientOpen(t *testing.T) {
	c := newClient(t, backends[0].addrs(t))
	s := valkey.New(c, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("client after Store.Close: %v", err)
	}
}

func TestDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		key := freshKey(t, c)
		p := core.PerSecond("delete", 5)
		if _, err := s.RunScript(context.Background(), recordScript, key, core.NewScriptArgs(&p, 1, 1)); err != nil {
			t.Fatal(err)
		}
		for range 2 { // deleting an absent key is not an error
			if err := s.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}
		}
		n, err := c.Do(context.Background(), c.B().Exists().Key(key.String()).Build()).AsInt64()
		if err != nil || n != 0 {
			t.Fatalf("EXISTS after Delete = %d, %v", n, err)
		}
	})
}
