package redis

import (
	"errors"
	"fmt"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// errNoClient is returned by every call on a Store built with a nil client.
var errNoClient = errors.New("sluice/redis: the store has no client (New was given nil)")

// errClosed is returned by every call after Close.
var errClosed = errors.New("sluice/redis: store is closed")

// errNilScript is returned by RunScript for a nil script.
var errNilScript = errors.New("sluice/redis: RunScript: nil script")

// errNilMutation is returned by Update for a nil mutation.
var errNilMutation = errors.New("sluice/redis: Update: nil mutation")

func errReplyShape(n int) error {
	return fmt.Errorf("sluice/redis: script replied with %d integers, want 6", n)
}

// notRunPrefixes are the error replies with which a server refuses a command
// before running it: a script that met one of them never ran, so the store
// may send it again (NOSCRIPT, MOVED, ASK) or report a plain failure.
var notRunPrefixes = [...]string{
	"NOSCRIPT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN",
	"BUSY", "NOAUTH", "WRONGPASS", "NOPERM", "READONLY", "OOM", "MISCONF", "NOREPLICAS",
}

// beforeWritePrefixes are the error replies that a command inside a script
// meets only at the script's first write: Redis checks memory (OOM), the
// replica's read-only state (READONLY), a failed save (MISCONF) and the
// replicas in sync (NOREPLICAS) for a write only while the script has
// written nothing ("if the script already made a modification to the
// dataset, we can't fail it"; Redis 6 likewise for OOM, and the others
// cannot change while a script runs). A script that raised one of them wrote
// nothing. Redis 7 and Valkey name the script after the reply ("OOM ...
// script: <sha>, on @user_script:3."); Redis 6 wraps it ("ERR Error running
// script (call to f_<sha>): @user_script:3: -OOM ...").
var beforeWritePrefixes = [...]string{"OOM", "READONLY", "MISCONF", "NOREPLICAS"}

// The three things a store error can say about its command: it was never
// sent, the server refused it before it wrote anything, or it was sent and
// its reply is lost (the outcome is unknown). Only the last may have changed
// the store.

// notRun reports whether err proves that the command did not change
// anything: it was not sent (notSent), or the server refused it before it
// wrote (rejected).
func notRun(err error) bool {
	if notSent(err) {
		// First: a dial's error may carry a reply of its own (a failover
		// client's sentinels that do not know the master answer nil).
		return true
	}
	var re goredis.Error
	if errors.As(err, &re) {
		return rejected(re.Error())
	}
	return false
}

// rejected reports whether msg, an error reply, proves that the command
// wrote nothing.
func rejected(msg string) bool {
	s := strings.TrimPrefix(msg, "ERR ") // KVRocks prefixes ERR
	if strings.Contains(s, " script: ") || strings.HasPrefix(s, "Error running script") {
		// An error raised by a command inside a running script: the script
		// may have written before it, unless the error is one that only a
		// first write can meet.
		if i := strings.Index(s, ": -"); i >= 0 && strings.HasPrefix(s, "Error running script") {
			s = s[i+3:] // Redis 6: the command's own reply follows ": -"
		}
		return hasCode(s, beforeWritePrefixes[:])
	}
	return hasCode(s, notRunPrefixes[:])
}

// hasCode reports whether s starts with one of codes, as a whole word.
func hasCode(s string, codes []string) bool {
	for _, p := range codes {
		if strings.HasPrefix(s, p) && (len(s) == len(p) || s[len(p)] == ' ') {
			return true
		}
	}
	return false
}

// notSent reports whether err, from a client the store configured (retries
// off, ContextTimeoutEnabled), proves that the command was never written to
// a connection. go-redis (v9.23, read in its source) fails a command before
// writing it with: ErrClosed (a closed client), ErrPoolTimeout and
// ErrPoolExhausted (no connection to be had), a *net.OpError whose Op is
// "dial" (a refused or failed connection), the error of any dial of a
// client the store built (dialError: a failover client's sentinels that
// name no primary, a caller's Dialer), or a bare context error: the
// caller's deadline or cancellation met while it waited for a pool turn or
// for a connection being dialled in the background, which during an outage
// is how a refused dial usually ends (go-redis retries the dial until the
// caller gives up). Once a command is being written, a deadline comes back
// as a *net.OpError from the socket ("write" or "read", i/o timeout),
// which proves nothing: a failed write may still have carried a whole
// command of a pipeline, and a failed read comes after the command went out.
func notSent(err error) bool {
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) ||
		errors.Is(err, goredis.ErrPoolExhausted) || errors.Is(err, errNoClient) || errors.Is(err, errClosed) {
		return true
	}
	var de dialError
	if errors.As(err, &de) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op == "dial"
	}
	return store.IsContextError(err)
}

// storeError wraps err for a caller: always a *store.Error (so it
// matches core.ErrUnavailable), and also core.ErrOutcomeUnknown unless err
// proves that nothing ran. An error reply from inside a script after it may
// have written, and any failure once the command was sent (a timeout, a
// broken connection) leave the outcome unknown. An error that already says
// the outcome is unknown (the batcher's) stays so.
func storeError(op string, err error) error {
	if errors.Is(err, core.ErrOutcomeUnknown) {
		return err
	}
	if notRun(err) {
		return &store.Error{Op: op, Err: err}
	}
	return &store.Error{Op: op, Err: store.UnknownOutcome(err)}
}

func isNoScript(err error) bool { return goredis.HasErrorPrefix(err, "NOSCRIPT") }
