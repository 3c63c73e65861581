package valkey_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// valkey-go sends again any command, writes included, that fails with its
// internal "connection is expired" error (client.go: singleClient.Do's
// `if err == errConnExpired { goto retry }`, and the same in the cluster and
// sentinel clients), which a command in flight on a connection whose
// ConnLifetime ran out gets when the server is slow to answer. So the store
// refuses a client with ConnLifetime set.

// TestOpenRefusesConnLifetime: Open says why before it connects.
func TestOpenRefusesConnLifetime(t *testing.T) {
	s, err := valkey.Open(valkeygo.ClientOption{InitAddress: []string{testenv.RedisAddr(t)}, ConnLifetime: time.Minute}, nil)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open accepted a ConnLifetime")
	}
	if !strings.Contains(err.Error(), "ConnLifetime") {
		t.Fatalf("Open error %q does not name ConnLifetime", err)
	}
	s, err = valkey.Open(valkeygo.ClientOption{InitAddress: []string{testenv.RedisAddr(t)}, DisableCache: true}, nil)
	if err != nil {
		t.Fatalf("Open without ConnLifetime: %v", err)
	}
	defer s.Close()
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "open", Limit: 5, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), "open-"+randomHex(t)); err != nil || !d.Allowed {
		t.Fatalf("a decision through Open's store: %+v, %v", d, err)
	}
}

// TestNewRefusesConnLifetime: a store over any kind of client valkey-go
// builds with ConnLifetime fails every call, saying why, and writes nothing.
func TestNewRefusesConnLifetime(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(t *testing.T) valkeygo.ClientOption
	}{
		{"single", func(t *testing.T) valkeygo.ClientOption {
			return valkeygo.ClientOption{InitAddress: []string{testenv.RedisAddr(t)}}
		}},
		{"forced single", func(t *testing.T) valkeygo.ClientOption {
			return valkeygo.ClientOption{InitAddress: []string{testenv.RedisAddr(t)}, ForceSingleClient: true}
		}},
		{"cluster", func(t *testing.T) valkeygo.ClientOption {
			return valkeygo.ClientOption{InitAddress: testenv.RedisClusterAddrs(t)}
		}},
		{"standalone", func(t *testing.T) valkeygo.ClientOption {
			return valkeygo.ClientOption{InitAddress: []string{testenv.RedisAddr(t)}, Standalone: valkeygo.StandaloneOption{ReplicaAddress: []string{testenv.RedisAddr(t)}},
				SendToReplicas: func(valkeygo.Completed) bool { return false }}
		}},
		{"sentinel", func(t *testing.T) valkeygo.ClientOption {
			return valkeygo.ClientOption{InitAddress: []string{testenv.RedisSentinelAddr(t)}, Sentinel: valkeygo.SentinelOption{MasterSet: testenv.SentinelMaster}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt(t)
			opt.DisableCache = true
			for _, lifetime := range []time.Duration{0, time.Minute} {
				opt.ConnLifetime = lifetime
				c, err := valkeygo.NewClient(opt)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				s := valkey.New(c, nil)
				key := freshKey(t, c)
				_, err = s.RunScript(context.Background(), algorithm.GCRA{}.Script(), key, store.ScriptArgs{N: 1, Limit: 5, Window: 60e6, Burst: 5, Interval: 12e6})
				if lifetime == 0 {
					if err != nil {
						t.Fatalf("without ConnLifetime: %v", err)
					}
					continue
				}
				if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "ConnLifetime") {
					t.Fatalf("with ConnLifetime: %v; want a known failure naming ConnLifetime", err)
				}
				if n, _ := c.Do(context.Background(), c.B().Exists().Key(key.String()).Build()).AsInt64(); n != 0 {
					t.Fatal("the refused store wrote its key")
				}
			}
		})
	}
}

// TestConnLifetimeResendsWrites shows why: through a proxy that holds the
// replies of the open connection, a script in flight when its connection's
// lifetime ends is sent again by valkey-go on a new connection, and runs
// twice. (Should valkey-go stop doing so, this test fails, and the refusal
// above may go.)
func TestConnLifetimeResendsWrites(t *testing.T) {
	p := newStallProxy(t, testenv.RedisAddr(t))
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{p.Addr()}, DisableCache: true,
		ForceSingleClient: true, PipelineMultiplex: -1, ConnLifetime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	admin := newClient(t, []string{testenv.RedisAddr(t)})
	key := freshKey(t, admin)
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	defer p.Resume()
	// A context that can be cancelled but has no deadline: valkey-go then
	// pipelines the command through its background writer and reader, as it
	// does any command that finds another in flight.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = c.Do(ctx, c.B().Eval().Script("return redis.call('INCR', KEYS[1])").Numkeys(1).Key(key.String()).Build()).Error()
	n, _ := admin.Do(context.Background(), admin.B().Get().Key(key.String()).Build()).AsInt64()
	t.Logf("error %v; the script ran %d times", err, n)
	if n < 2 {
		t.Fatalf("the script ran %d times; valkey-go no longer re-sends a write on an expired connection?", n)
	}
}
