package valkey

import (
	"errors"
	"net"
	"strings"

	"github.com/sluicehq/sluice/core"
	valkeygo "github.com/valkey-io/valkey-go"
)

// storeError wraps err, from a command sent for op, as a *core.StoreError
// (which matches core.ErrUnavailable). For a write it also decides whether
// the command may have run: then the error matches core.ErrOutcomeUnknown
// too, and nobody may send the command again.
//
// An error reply from the server (NOSCRIPT, MOVED, READONLY, OOM, BUSY, ...)
// means the command was refused before it changed anything, except a Lua
// runtime error, which can come after the script wrote. A failed dial means
// nothing was sent. Any other client-side error (a deadline, a cancelled
// context, a broken or closed connection) can come after the server ran
// the command and before its reply arrived: the outcome is unknown.
func storeError(op string, err error, write bool) error {
	if write && mayHaveRun(err) {
		err = core.UnknownOutcome(err)
	}
	return &core.StoreError{Op: op, Err: err}
}

func mayHaveRun(err error) bool {
	if verr, ok := valkeygo.IsValkeyErr(err); ok {
		return isScriptRuntimeError(verr)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// isScriptRuntimeError reports a script that failed while running (Redis
// 7 and Valkey say "ERR user_script:…", Redis 6 "ERR Error running
// script…"): it may have written before it failed. Every other error reply
// is sent before a script starts.
func isScriptRuntimeError(err *valkeygo.ValkeyError) bool {
	msg := err.Error()
	return strings.Contains(msg, "user_script") || strings.Contains(msg, "Error running script")
}
