package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// ownServer is a redis-server of one test's own (testenv.StartRedis), with
// an admin client.
type ownServer struct {
	*testenv.OwnRedis
	addr  string
	admin *goredis.Client
}

// startServer starts a redis-server with args added to its command line;
// it is stopped when the test ends.
func startServer(t *testing.T, args ...string) *ownServer {
	t.Helper()
	r := testenv.StartRedis(t, args...)
	s := &ownServer{OwnRedis: r, addr: r.Addr, admin: goredis.NewClient(&goredis.Options{Addr: r.Addr})}
	t.Cleanup(func() { _ = s.admin.Close() })
	return s
}
