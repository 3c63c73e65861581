package valkey

import "testing"

// TestBeforeFirstWrite: which errors raised inside a script prove that it
// wrote nothing, in the forms Redis 7 / Valkey and Redis 6 give them.
func TestBeforeFirstWrite(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"OOM command not allowed when used memory > 'maxmemory'. script: 177d, on @user_script:104.", true},
		{"READONLY You can't write against a read only replica. script: 177d, on @user_script:9.", true},
		{"MISCONF Redis is configured to save RDB snapshots. script: 177d, on @user_script:9.", true},
		{"NOREPLICAS Not enough good replicas to write. script: 177d, on @user_script:9.", true},
		{"ERR Error running script (call to f_177d): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'.", true},
		{"WRONGTYPE Operation against a key holding the wrong kind of value script: 177d, on @user_script:2.", false},
		{"ERR Error running script (call to f_177d): @user_script:1: @user_script: 1: -WRONGTYPE Operation against a key", false},
		{"ERR user_script:1: attempt to compare nil with number script: 177d, on @user_script:1.", false},
		{"OOMX not a code", false},
	} {
		if got := beforeFirstWrite(tc.msg); got != tc.want {
			t.Errorf("beforeFirstWrite(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
