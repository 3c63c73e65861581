package valkey_test

import (
	"testing"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/internal/testenv"
)

// ownServer is a redis-server of one test's own (testenv.StartRedis), with
// an admin client.
type ownServer struct {
	*testenv.OwnRedis
	addr  string
	admin valkeygo.Client
}

// startServer starts a redis-server with args added to its command line;
// it is stopped when the test ends.
func startServer(t *testing.T, args ...string) *ownServer {
	t.Helper()
	r := testenv.StartRedis(t, args...)
	s := &ownServer{OwnRedis: r, addr: r.Addr}
	s.admin = s.client(t)
	return s
}

// client is a fresh single-node client of the server, closed when the test
// ends.
func (s *ownServer) client(t *testing.T) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{s.addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("valkey-go client for %s: %v", s.addr, err)
	}
	t.Cleanup(c.Close)
	return c
}
