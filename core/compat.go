package core

import "github.com/sluicehq/sluice/store"

// The store contract moved to package store. These aliases keep code written
// against the old names compiling while the rename lands; they are removed
// once every package names package store.
type (
	Store           = store.Store
	Mutation        = store.Mutation
	Key             = store.Key
	Deleter         = store.Deleter
	Closer          = store.Closer
	ScriptRunner    = store.ScriptRunner
	Script          = store.Script
	ScriptArgs      = store.ScriptArgs
	ScriptResult    = store.ScriptResult
	CASBackend      = store.CASBackend
	RetryPolicy     = store.RetryPolicy
	ContentionError = store.ContentionError
	StoreError      = store.Error
	ClockSkewer     = store.ClockSkewer
	Binder          = binder
	Taker           = taker
	InProcess       = interface{ InProcess() }
	Timed           = interface{ Now() int64 }
	Retimer         = interface{ Retime() }
)

const (
	OpTake    = store.OpTake
	OpRelease = store.OpRelease
	HashBytes = store.HashBytes
	HashLen   = store.HashLen
)

var (
	NewScript      = store.NewScript
	Namespace      = store.Namespace
	CASUpdate      = store.CASUpdate
	UnknownOutcome = store.UnknownOutcome
	IsContextError = store.IsContextError
)
