package memcache

import "github.com/sluicehq/sluice/store"

// CAS exposes the store's compare-and-swap operations to this package's
// external tests, which check what each round trip does.
func CAS(s *Store) store.CASBackend { return (*casOps)(s) }
