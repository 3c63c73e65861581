// Package adaptertest is the behaviour every HTTP adapter must show, written
// once and run by each adapter's own tests against its real framework over
// real HTTP (httptest servers on loopback): status codes, the RateLimit
// fields parsed as Structured Fields, problem bodies, identities, skip
// paths, costs, layers, concurrency leases (also on panic), leaky-bucket
// delays, and the failure policies.
//
// An adapter calls Run with a Harness that mounts routes on its framework:
//
//	func TestAdapter(t *testing.T) { adaptertest.Run(t, harness) }
package adaptertest
