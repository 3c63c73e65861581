// Package faults is Sluice's fault matrix: real redis-server and memcached
// processes of the tests' own, a Shopify/toxiproxy proxy run in process
// between each store and its server, and every store (go-redis, valkey-go,
// memcached) under every failure mode (closed, open, fallback) behind a
// guard.Breaker, through kill, stall, reset peer, bandwidth squeeze, server
// restart, SCRIPT FLUSH during load, OOM (maxmemory, noeviction) and the
// loss of one Redis Cluster master.
//
// It is a module of its own so that the proxy and its dependencies never
// enter the root go.mod that users pull. `make test` runs it; alone:
//
//	cd faults && go test -race -count=1 .
//
// It needs redis-server and memcached on the PATH (it skips without them,
// and fails when SLUICE_REQUIRE_SERVERS or CI is set), and talks only to
// 127.0.0.1.
package faults
