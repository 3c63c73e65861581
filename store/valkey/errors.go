package valkey

import (
	"errors"
	"net"
	"strings"

	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// storeError wraps err, from a command sent for op, as a *store.Error
// (which matches core.ErrUnavailable). For a write it also decides whether
// the command may have run: then the error matches core.ErrOutcomeUnknown
// too, and nobody may send the command again.
//
// What is known falls in three classes. Not sent: a failed dial (valkey-go
// dials when a command needs a connection, and reports the *net.OpError).
// Rejected before writing: an error reply from the server (NOSCRIPT, MOVED,
// READONLY, OOM, BUSY, ...) refuses the command before it changes anything,
// and so do OOM, READONLY, MISCONF and NOREPLICAS raised inside a script,
// which Redis and Valkey raise only at a script's first write. Unknown:
// any other error reply from inside a running script (it may come after the
// script wrote), and any other client-side error (a deadline, a cancelled
// context, a broken or closed connection), which can come after the server
// ran the command and before its reply arrived. valkey-go turns a socket
// deadline met while it reads a reply into a bare context.DeadlineExceeded,
// so a context error proves nothing here.
func storeError(op string, err error, write bool) error {
	if write && mayHaveRun(err) {
		err = store.UnknownOutcome(err)
	}
	return &store.Error{Op: op, Err: err}
}

func mayHaveRun(err error) bool {
	if verr, ok := valkeygo.IsValkeyErr(err); ok {
		return isScriptRuntimeError(verr) && !beforeFirstWrite(verr.Error())
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// isScriptRuntimeError reports a script that failed while running (Redis
// 7 and Valkey say "... script: <sha>, on @user_script:…", Redis 6 "ERR
// Error running script…"): it may have written before it failed. Every
// other error reply is sent before a script starts.
func isScriptRuntimeError(err *valkeygo.ValkeyError) bool {
	msg := err.Error()
	return strings.Contains(msg, "user_script") || strings.Contains(msg, "Error running script")
}

// beforeFirstWrite reports an error raised inside a script that a script
// meets only while it has written nothing: Redis and Valkey check memory
// (OOM), a read-only replica (READONLY), a failed save (MISCONF) and the
// replicas in sync (NOREPLICAS) for a script's write only until it has
// written ("if the script already made a modification to the dataset, we
// can't fail it"), and the last three cannot change while a script runs.
// Redis 7 and Valkey start the message with the code; Redis 6 wraps it
// ("ERR Error running script (call to f_<sha>): @user_script:3: -OOM ...").
func beforeFirstWrite(msg string) bool {
	if i := strings.Index(msg, ": -"); i >= 0 && strings.Contains(msg[:i], "Error running script") {
		msg = msg[i+3:]
	}
	for _, code := range [...]string{"OOM", "READONLY", "MISCONF", "NOREPLICAS"} {
		if strings.HasPrefix(msg, code) && (len(msg) == len(code) || msg[len(code)] == ' ') {
			return true
		}
	}
	return false
}
