package redis

import (
	"errors"
	"fmt"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
)

// errNoClient is returned by every call on a Store built with a nil client.
var errNoClient = errors.New("sluice/redis: the store has no client (New was given nil)")

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
	"BUSY", "NOAUTH", "WRONGPASS", "NOPERM", "READONLY",
}

// notRun reports whether err proves that the command did not run: a refusal
// from the server, or a failure before anything was written to a
// connection (no connection to be had, a closed client).
func notRun(err error) bool {
	var re goredis.Error
	if errors.As(err, &re) {
		// An error raised by a command inside a running script names the
		// script ("... script: <sha>, on @user_script:3."): the script may
		// have written before it, so that is no proof, whatever its code.
		s := strings.TrimPrefix(re.Error(), "ERR ") // KVRocks prefixes ERR
		if strings.Contains(s, " script: ") {
			return false
		}
		for _, p := range notRunPrefixes {
			if strings.HasPrefix(s, p) && (len(s) == len(p) || s[len(p)] == ' ') {
				return true
			}
		}
		return false
	}
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, errNoClient) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// storeError wraps err for a caller: always a *core.StoreError (so it
// matches core.ErrUnavailable), and also core.ErrOutcomeUnknown unless err
// proves that nothing ran. An error reply from inside a script (after it may
// have written) and any failure once the command was sent (a timeout, a
// broken connection) leave the outcome unknown.
func storeError(op string, err error) error {
	se := &core.StoreError{Op: op, Err: err}
	if notRun(err) {
		return se
	}
	return core.UnknownOutcome(se)
}

func isNoScript(err error) bool { return goredis.HasErrorPrefix(err, "NOSCRIPT") }
