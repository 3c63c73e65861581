package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// These tests hold the store's errors to what is known of each command: not
// sent, rejected by the server before the script wrote anything, or sent
// with its reply lost. Only the last may match core.ErrOutcomeUnknown; all
// match core.ErrUnavailable.

func wantKnown(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: no error", what)
	case !errors.Is(err, core.ErrUnavailable):
		t.Fatalf("%s: %v does not match core.ErrUnavailable", what, err)
	case errors.Is(err, core.ErrOutcomeUnknown):
		t.Fatalf("%s: %v says the outcome is unknown, but the command provably did not run", what, err)
	}
}

// TestStoppedServerNotUnknown: the server answers, then stops. The first
// call may still go out on the dead connection (valkey-go reads nothing
// from an idle one, so it learns of the end only then) and has, honestly,
// an unknown outcome; soon each call's dial is refused, and from then on no
// call says its outcome is unknown.
func TestStoppedServerNotUnknown(t *testing.T) {
	srv := startServer(t)
	// One connection (no multiplexing), so that one call learns of its end.
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{srv.addr}, DisableCache: true,
		ForceSingleClient: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := valkey.New(c, nil)
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "stop", Limit: 100, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "a"); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	srv.Stop()
	time.Sleep(50 * time.Millisecond) // the connection's end reaches the client
	first := -1
	for i := 0; i < 8 && first < 0; i++ {
		_, err := lim.Allow(ctx, "a")
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("call %d after the stop: %v", i, err)
		}
		if !errors.Is(err, core.ErrOutcomeUnknown) {
			first = i
		}
	}
	if first < 0 {
		t.Fatal("8 calls after the stop, every error still says the outcome is unknown")
	}
	for i := range 5 {
		_, err := lim.Allow(ctx, "a")
		wantKnown(t, fmt.Sprintf("call %d after the first refused dial", i+1), err)
	}
}

// TestOOMScriptNotUnknown: with maxmemory reached and noeviction, the
// script's first write is refused with OOM; the script wrote nothing, so
// the outcome is known, on the script path and on the generic path.
func TestOOMScriptNotUnknown(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	admin := srv.admin
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue(kv[0], kv[1]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin.Do(context.Background(), admin.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build())
	})
	s := valkey.New(srv.client(t), nil)
	for _, noScript := range []bool{false, true} {
		lim, err := core.New(core.Config{Policy: core.Policy{Name: fmt.Sprint("oom", noScript), Limit: 10, Window: time.Minute},
			Algorithm: algorithm.GCRA{}, Store: s, NoScript: noScript})
		if err != nil {
			t.Fatal(err)
		}
		_, err = lim.Allow(ctx, "a")
		wantKnown(t, fmt.Sprintf("NoScript %v under OOM", noScript), err)
		if n, _ := admin.Do(ctx, admin.B().Exists().Key(lim.Key("a").String()).Build()).AsInt64(); n != 0 {
			t.Fatalf("NoScript %v: the key was written under OOM", noScript)
		}
	}
}

// TestScriptErrorAfterWriteUnknown: a script that wrote, then failed, has
// an unknown outcome (it is not mistaken for a refusal).
func TestScriptErrorAfterWriteUnknown(t *testing.T) {
	srv := startServer(t)
	s := valkey.New(srv.client(t), nil)
	sc := store.NewScript("test-write-then-fail", `redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[1], 'f', 'v')
return {1, 0, 0, 0, 0, 0}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.RunScript(ctx, sc, store.Key{Namespace: "w", Identity: t.Name()}, store.ScriptArgs{})
	if !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("a script that failed after a write: %v; want an unknown outcome", err)
	}
	// Worded as on every store: the store's error, then what is known.
	if want := "sluice: store script: outcome unknown: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start %q", err, want)
	}
}
