package faults

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/guard"
)

// TestFleetHeartbeatsOnRealStores counts a fleet of three from heartbeats
// written to a real server through each store, and keeps the count while
// the server is down.
func TestFleetHeartbeatsOnRealStores(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			var srv *server
			if sk.name == "memcache" {
				srv = startMemcached(t)
			} else {
				srv = startRedis(t)
			}
			s := sk.open(t, []string{srv.Addr}, false)
			o := &guard.FleetOptions{Store: s, Interval: 50 * time.Millisecond}
			var fs []*guard.Fleet
			for range 3 {
				f, err := guard.NewFleet(o)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = f.Close() })
				fs = append(fs, f)
			}
			deadline := time.Now().Add(5 * time.Second)
			for fs[0].Size() != 3 || fs[1].Size() != 3 || fs[2].Size() != 3 {
				if time.Now().After(deadline) {
					t.Fatalf("sizes %d %d %d, want 3", fs[0].Size(), fs[1].Size(), fs[2].Size())
				}
				time.Sleep(10 * time.Millisecond)
			}
			srv.Kill()
			time.Sleep(300 * time.Millisecond) // two Expiries' worth of failed heartbeats
			for i, f := range fs {
				if f.Size() != 3 {
					t.Errorf("instance %d during the outage: size %d, want the last count, 3", i, f.Size())
				}
			}
		})
	}
}
