package memcache_test

import (
	"context"
	"strings"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// A nil Mutation is an error, as on the other stores, not a panic; nothing
// is sent for it (the client's server does not exist).
func TestUpdateRefusesANilMutation(t *testing.T) {
	s := memcache.New(gomemcache.New("127.0.0.1:1"), nil)
	defer s.Close()
	err := s.Update(context.Background(), store.Key{Namespace: "sluice:nil", Identity: "a"}, nil)
	if err == nil || !strings.Contains(err.Error(), "nil mutation") {
		t.Fatalf("Update with a nil Mutation: %v, want an error naming it", err)
	}
}
