// Package e2e holds the end-to-end tests of the HTTP adapters: three
// instances of one application — one on net/http, one on gin, one on echo —
// each with its own Redis client, store and limiters, serving on loopback
// ports and sharing one real redis-server. The tests show that the fleet
// holds one limit: concurrent requests for one client spread over the three
// admit exactly the limit; a Retry-After is honest (a request sent after it
// is admitted, by another instance); and a store that is down answers 503
// within the limiter's deadline when failing closed, 200 when failing open.
//
// The package has no code of its own; run it with the servers:
//
//	scripts/servers.sh go test ./adapters/internal/e2e
package e2e
