package store

import "context"

// MultiScriptRunner is the optional fast path of several limits on one
// identity (core.Multi): one server-side script over one key per limit,
// run in one round trip. Every key passed shares one identity, so every
// key shares its hash tag and lands in one Redis Cluster slot: a
// multi-key script is legal on a cluster.
//
// args are the script's ARGV, every one an integer (written in decimal);
// the reply is the script's array of integers, appended to reply (pass a
// buffer to run without allocating for it). As for ScriptRunner, a store
// must never re-send a script whose outcome is unknown (it returns an
// error matching ErrOutcomeUnknown), and recovers a missing script
// (NOSCRIPT) itself.
type MultiScriptRunner interface {
	RunMultiScript(ctx context.Context, s *Script, keys []Key, args []int64, reply []int64) ([]int64, error)
}
