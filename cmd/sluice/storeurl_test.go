package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The command opens stores with storeurl.Open, so its parameters and its
// errors are the library's.
func TestStoreURLParameters(t *testing.T) {
	addr := testenv.RedisAddr(t)
	code, out, errOut := sluice(t, "bench", "--store", "redis://"+addr+"?pool_sise=4", "--duration", "100ms")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, "unexpected option: pool_sise") {
		t.Errorf("a misspelt parameter: %q does not name it", errOut)
	}
	cluster := strings.Join(testenv.RedisClusterAddrs(t), ",")
	for _, spec := range []string{
		"redis://" + addr + "?pool_size=4&clock_skew=2s",
		"redis+cluster://" + cluster + "?pipelines=4",
		"memcache://" + strings.Join(testenv.MemcacheAddrs(t), ",") + "?max_idle_conns=16",
	} {
		// Eight callers, not bench's 64: the test is of the parameters.
		// Under the race detector 64 callers on memcached took 100-400 ms a
		// decision, past the Limiter's 100 ms deadline, and a run could end
		// with every decision an error.
		code, out, errOut := sluice(t, "bench", "--store", spec, "--concurrency", "8", "--duration", "200ms")
		wantCode(t, code, exitOK, out, errOut)
	}
}
