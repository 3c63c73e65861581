// Package bench measures Sluice's stores against their peers on the same
// servers, in the same run. It is a module of its own so that the library's
// go.mod never depends on the peers.
package bench
