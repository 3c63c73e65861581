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

// Whatever is wrong with a --store URL, the message names it without the
// password, whether the command's own checks or storeurl's find it.
func TestStoreErrorsHideThePassword(t *testing.T) {
	for _, c := range []struct{ spec, says string }{
		{"redis://:s3cretpw@127.0.0.1", "not host:port"},
		{"redis://u:s3cretpw@127.0.0.1,127.0.0.1:6379", "not host:port"},
		{"ftp://u:s3cretpw@127.0.0.1:21", `unknown scheme "ftp"`},
		{"redis://u:s3cretpw@", "no host:port"},
		// url.Parse refuses these: the message is the real problem.
		{"redis://u:s3cretpw@h:abc", `invalid port ":abc" after host`},
		{"redis://:s3cretpw#x@127.0.0.1:6379", "must be %-escaped"},
		{"redis://u:s3cretpw%zz@127.0.0.1:6379", "invalid URL escape"},
		{"redis://u:1/s3cretpw@127.0.0.1:6379", "must be %-escaped"},
		{"redis://u:s3cretpw@127.0.0.1:6379?nope=1", "unexpected option: nope"},
		{"redis+sentinel://127.0.0.1:26379/m?password=s3cretpw&nope=1", "unexpected option: nope"},
		// A host url.Parse refuses, and a password with a '?' or a
		// second '@'; a query password with a '&'; a mistyped scheme.
		{"redis://u:s3cretpw?a=b@ 127.0.0.1:6379", "not a URL"},
		{"memcached://u:s3cretpw?a=b@ 127.0.0.1:1", "not a URL"},
		{"redis://u:p@/s3cretpw@ 127.0.0.1:6379", "no host"},
		{"redis+sentinel://127.0.0.1:26379/m?password=ab&s3cretpw", "has no value"},
		{"memory:/u:s3cretpw@h", "no path"},
	} {
		for _, cmd := range []string{"demo", "bench"} {
			code, out, errOut := sluice(t, cmd, "--store", c.spec)
			if code != exitUsage || !strings.Contains(errOut, c.says) || strings.Contains(out+errOut, "s3cretpw") {
				t.Errorf("sluice %s --store %q: exit %d, want %d saying %q without the password\nstdout: %s\nstderr: %s", cmd, c.spec, code, exitUsage, c.says, out, errOut)
			}
		}
	}
}

// The command adds valkey's dial timeout to the query as written: a
// malformed query still reaches storeurl, which refuses it.
func TestValkeyQueryIsPassedAsWritten(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "valkey://127.0.0.1:1?db=%zz")
	if code != exitUsage || !strings.Contains(errOut, "malformed query") {
		t.Errorf("exit %d, want %d saying malformed query\nstdout: %s\nstderr: %s", code, exitUsage, out, errOut)
	}
}

// memory:// is storeurl's in-process store, with its parameters: one store
// for the whole run, as --store memory is.
func TestMemoryStoreURL(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory://?max_keys=1000&shards=4", "--duration", "100ms", "--concurrency", "2", "--instances", "2")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "memory (in-process)") {
		t.Errorf("bench on memory://: output does not name the store:\n%s", out)
	}
	code, out, errOut = sluice(t, "conformance", "--store", "memory://", "--run", "gcra")
	wantCode(t, code, exitOK, out, errOut)
	code, out, errOut = sluice(t, "bench", "--store", "memory://?max_keys=0")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, "max_keys") {
		t.Errorf("memory://?max_keys=0: %q does not name max_keys", errOut)
	}
}

// A host list with an IPv6 literal gets the command's own handling, as
// one without does: its port check, and its two spellings (redis:// with
// several hosts for a cluster, memcached://). A bad valkey URL is shown
// as written, without the dial timeout the command adds, and a refused
// connection is not said to be silent.
func TestStoreSpellingsTakeIPv6HostLists(t *testing.T) {
	for _, c := range []struct {
		spec string
		code int
		says string
	}{
		{"redis+cluster://[::1]:1,127.0.0.1", exitUsage, `"127.0.0.1" is not host:port`},
		{"redis://[::1]:1,[::1]:2", exitUnreachable, "redis cluster [::1]:1,[::1]:2"},
		{"memcached://[::1]:1,[::1]:2", exitUnreachable, "memcached [::1]:1,[::1]:2"},
		{"valkey://127.0.0.1:1?nope=1", exitUsage, `"valkey://127.0.0.1:1?nope=1"`},
		{"redis://127.0.0.1:1", exitUnreachable, "could not be reached"},
		{"valkey://127.0.0.1:1", exitUnreachable, "could not be reached"},
		{"memcached://[::1]:1,[::1]:2?bogus=1", exitUsage, `"memcached://[::1]:1,[::1]:2?bogus=1"`},
		{"redis://[::1]:1,[::1]:2?read_only=true", exitUsage, `"redis://[::1]:1,[::1]:2?read_only=true"`},
		{"memcache://" + testenv.SilentListener(t), exitUnreachable, "did not answer in time"},
	} {
		code, out, errOut := sluice(t, "bench", "--store", c.spec, "--duration", "100ms")
		if code != c.code || !strings.Contains(errOut, c.says) || strings.Contains(errOut, "dial_timeout=") {
			t.Errorf("--store %s: exit %d, want %d saying %q (and no dial_timeout=)\nstdout: %s\nstderr: %s", c.spec, code, c.code, c.says, out, errOut)
		}
	}
}
