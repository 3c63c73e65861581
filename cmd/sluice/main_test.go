package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/cmd/sluice/internal/simulate"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestMain lets this test binary stand in for the sluice binary when
// `sluice conformance` re-executes itself to run the suite.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		conformanceChild(spec)
		return
	}
	os.Exit(m.Run())
}

// sluice runs the command in-process and returns its exit code and output.
func sluice(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func wantCode(t *testing.T, got, want int, stdout, stderr string) {
	t.Helper()
	if got != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got, want, stdout, stderr)
	}
}

func TestDemoEmbedded(t *testing.T) {
	code, out, errOut := sluice(t, "demo")
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{
		"embedded Redis", "sliding-log      25        25",
		"net/http", "gin", "echo", "total     25", "Retry-After: ", `Ratelimit-Policy: "demo";q=25;w=2`,
		"after Retry-After: 200 OK", "OK: every algorithm kept its promise",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// A burst of fewer requests than the limit admits every one, and the demo
// says so rather than FAIL; a window too short to hold a burst is a usage
// error, not a false failure.
func TestDemoFlagsItAccepts(t *testing.T) {
	code, out, errOut := sluice(t, "demo", "--requests", "5")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "gcra             5") || !strings.Contains(out, "OK: every algorithm kept its promise") {
		t.Errorf("demo --requests 5:\n%s", out)
	}
	code, out, errOut = sluice(t, "demo", "--window", "5ms")
	wantCode(t, code, exitUsage, out, errOut)
	// Limits whose interval is not a whole number of µs: the leaky bucket
	// may admit one more than its quota once the burst took a µs, as its
	// bound B + ⌊(d+M)/T⌋ allows.
	for _, limit := range []string{"3", "7"} {
		code, out, errOut = sluice(t, "demo", "--store", "memory", "--limit", limit)
		wantCode(t, code, exitOK, out, errOut)
	}
	// Over HTTP too: a leaky bucket's queue is deeper than its burst, and
	// admits its Quota (twice the limit here), not the limit.
	code, out, errOut = sluice(t, "demo", "--store", "memory", "--http-algorithm", "leaky-bucket")
	wantCode(t, code, exitOK, out, errOut)
	// A bucket gives back one request's room per interval: after the
	// burst's Retry-After the first instance is admitted and the next is
	// refused again, with a Retry-After of its own that it honours.
	for _, alg := range []string{"gcra", "token-bucket"} {
		code, out, errOut = sluice(t, "demo", "--store", "memory", "--limit", "3", "--http-algorithm", alg)
		wantCode(t, code, exitOK, out, errOut)
		if n := strings.Count(out, "after Retry-After: 200 OK"); n != 3 {
			t.Errorf("--http-algorithm %s --limit 3: %d instances admitted after Retry-After, want 3:\n%s", alg, n, out)
		}
	}
	// No 429 over HTTP: every instance is admitted once the burst has left
	// the window, two for the sliding counter.
	code, out, errOut = sluice(t, "demo", "--store", "memory", "--limit", "5", "--window", "1s", "--http-algorithm", "sliding-counter", "--requests", "4")
	wantCode(t, code, exitOK, out, errOut)
}

func TestDemoRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	code, out, errOut := sluice(t, "demo", "--store", "redis://"+addr, "--window", "1s")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "store: redis "+addr) || !strings.Contains(out, "OK: every algorithm kept its promise") {
		t.Fatalf("demo against redis-server:\n%s", out)
	}
}

func TestSimulateWritesPNG(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plot.png")
	code, out, errOut := sluice(t, "simulate", "--pattern", "boundary", "--out", file)
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{"fixed-window", "sliding-log", "worst window", "wrote " + file} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate output lacks %q:\n%s", want, out)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", file, err)
	}
	w, h := simulate.PlotSize(7)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("plot is %dx%d, want %dx%d (one panel per algorithm)", b.Dx(), b.Dy(), w, h)
	}
}

func TestSimulateEveryPattern(t *testing.T) {
	for _, p := range simulate.Patterns {
		code, out, errOut := sluice(t, "simulate", "--pattern", p.Name, "--out", "", "--duration", "5s")
		wantCode(t, code, exitOK, out, errOut)
		if !strings.Contains(out, "pattern "+p.Name) {
			t.Errorf("%s: output:\n%s", p.Name, out)
		}
	}
}

func TestConformanceMemory(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "memory")
	wantCode(t, code, exitOK, out, errOut)
	for _, alg := range []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "gcra", "leaky-bucket", "concurrency"} {
		if !strings.Contains(out, alg) {
			t.Errorf("table lacks %s:\n%s", alg, out)
		}
	}
	if !strings.Contains(out, "PASS") || strings.Contains(out, "FAIL") {
		t.Fatalf("output:\n%s", out)
	}
}

// The command's own copies decide one key from three more processes
// (conformance's Processes check) on a server, and skip it on the
// embedded Redis, which each process would start anew.
func TestConformanceProcesses(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "redis://"+testenv.RedisAddr(t), "--run", "Processes", "-v")
	wantCode(t, code, exitOK, out, errOut)
	for _, path := range []string{"generic", "script"} {
		if !strings.Contains(out, "--- PASS: TestConformance/"+path+"/Processes ") {
			t.Errorf("Processes did not pass on the %s path:\n%s", path, out)
		}
	}
	code, out, errOut = sluice(t, "conformance", "--store", "embedded", "--run", "Processes", "-v")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "--- SKIP: TestConformance/generic/Processes ") {
		t.Errorf("Processes was not skipped on the embedded Redis:\n%s", out)
	}
}

// The embedded Redis expires keys on the wall clock, as a Redis does, so
// the suite's expiry checks pass on it too.
func TestConformanceEmbedded(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "embedded", "--run", "Expiry|gcra", "-v")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "--- PASS: TestConformance/generic/Expiry ") {
		t.Fatalf("Expiry did not pass on the generic path:\n%s", out)
	}
}

func TestConformanceRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	code, out, errOut := sluice(t, "conformance", "--store", "redis://"+addr, "--run", "gcra")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "script") || !strings.Contains(out, "generic") || !strings.Contains(out, "gcra") {
		t.Fatalf("want gcra on both paths:\n%s", out)
	}
}

// A suite that runs out of --timeout says so, names the flag, and dumps no
// goroutines.
func TestConformanceTimeout(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "memory", "--timeout", "50ms")
	wantCode(t, code, exitFailed, out, errOut)
	if !strings.Contains(errOut, "--timeout") || strings.Contains(errOut+out, "goroutine ") {
		t.Fatalf("want a message naming --timeout and no goroutine dump\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// conformanceKeys returns a count of the suite's keys in database db of
// the server at addr: each test that counts them has a database of its
// own, so that no other test's keys are counted.
func conformanceKeys(t *testing.T, addr string, db int) func() int {
	c := goredis.NewClient(&goredis.Options{Addr: addr, DB: db})
	t.Cleanup(func() { c.Close() })
	return func() int {
		keys, err := c.Keys(context.Background(), "sluice-conformance*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
}

// The command deletes the keys it wrote, the multi-limit checks' too. Its
// own database of the server, so that no other test's keys are counted.
func TestConformanceLeavesNoKeys(t *testing.T) {
	addr := testenv.RedisAddr(t)
	count := conformanceKeys(t, addr, 14)
	before := count()
	code, out, errOut := sluice(t, "conformance", "--store", "redis://"+addr+"/14", "--run", "Multi|gcra")
	wantCode(t, code, exitOK, out, errOut)
	if n := count() - before; n > 0 {
		t.Fatalf("the run left %d keys behind in the store", n)
	}
}

// A run that --timeout ends deletes the keys of the checks it cut short
// too (the suite's own cleanups never run: its process ends at the
// deadline), and says which check was still running.
func TestConformanceTimedOutLeavesNoKeys(t *testing.T) {
	addr := testenv.RedisAddr(t)
	count := conformanceKeys(t, addr, 13)
	before := count()
	code, out, errOut := sluice(t, "conformance", "--store", "redis://"+addr+"/13", "--timeout", "3s")
	wantCode(t, code, exitFailed, out, errOut)
	if !strings.Contains(errOut, "did not finish within --timeout 3s") || !strings.Contains(errOut, "was still running") {
		t.Errorf("stderr does not say which check the deadline cut short:\n%s", errOut)
	}
	if n := count() - before; n > 0 {
		t.Fatalf("the run that timed out left %d keys behind in the store", n)
	}
}

// cutShort counts the checks a timed-out suite finished, from its -v
// output (package testing prints no result of a subtest whose parent has
// not finished), and names the deepest test it lists as running.
func TestCutShort(t *testing.T) {
	out := "=== RUN   TestConformance\n=== RUN   TestConformance/Capabilities\n=== RUN   TestConformance/generic\n" +
		"=== RUN   TestConformance/generic/gcra\n=== RUN   TestConformance/generic/gcra/Admission\n    run.go:60: a log line\n" +
		"=== RUN   TestConformance/generic/gcra/Steps\n=== RUN   TestConformance/generic/Retention\n" +
		"panic: test timed out after 3s\n\trunning tests:\n\t\tTestConformance (3s)\n\t\tTestConformance/generic (3s)\n" +
		"\t\tTestConformance/generic/Retention (2s)\n\ngoroutine 6 [running]:\n"
	finished, running := cutShort([]byte(out))
	if finished != 3 || running != "generic/Retention (after 2s)" {
		t.Errorf("cutShort: %d finished, running %q; want 3 (Capabilities, Admission, Steps) and generic/Retention (after 2s)", finished, running)
	}
}

func TestConformanceSentinel(t *testing.T) {
	addr := testenv.RedisSentinelAddr(t)
	code, out, errOut := sluice(t, "conformance", "--store", "redis+sentinel://"+addr+"/"+testenv.SentinelMaster, "--run", "token-bucket")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "script") || !strings.Contains(out, "token-bucket") || !strings.Contains(out, "PASS") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestConformanceMemcache(t *testing.T) {
	addrs := testenv.MemcacheAddrs(t)
	code, out, errOut := sluice(t, "conformance", "--store", "memcache://"+addrs[0], "--run", "token-bucket")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "token-bucket") || !strings.Contains(out, "PASS") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestBench(t *testing.T) {
	stores := []string{"memory"}
	if os.Getenv("SLUICE_REDIS_ADDR") != "" || os.Getenv("SLUICE_REQUIRE_SERVERS") != "" {
		stores = append(stores, "redis://"+testenv.RedisAddr(t), "valkey://"+testenv.RedisAddr(t), "memcache://"+strings.Join(testenv.MemcacheAddrs(t), ","))
	}
	for _, s := range stores {
		code, out, errOut := sluice(t, "bench", "--store", s, "--duration", "300ms", "--concurrency", "8", "--keys", "100", "--progress", "on")
		wantCode(t, code, exitOK, out, errOut)
		for _, want := range []string{"decisions/s", "p50", "p99", "p99.9"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: bench output lacks %q:\n%s", s, want, out)
			}
		}
		var total, admitted, denied, errs int
		i := strings.Index(out, "decisions   ")
		j := strings.Index(out, "admitted    ")
		if i < 0 || j < 0 {
			t.Fatalf("%s: no counts in:\n%s", s, out)
		}
		fmt.Sscanf(out[i:], "decisions   %d", &total)
		fmt.Sscanf(out[j:], "admitted    %d, denied %d, errors %d", &admitted, &denied, &errs)
		if total == 0 || admitted+denied+errs != total {
			t.Errorf("%s: %d decisions but %d admitted + %d denied + %d errors:\n%s", s, total, admitted, denied, errs, out)
		}
		// In-process, nothing can fail; over loopback a call may rarely
		// miss the production deadline (100 ms) on a loaded machine.
		if s == "memory" && errs != 0 || errs*100 > total {
			t.Errorf("%s: %d errors in %d decisions:\n%s", s, errs, total, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		says string
	}{
		{[]string{}, exitUsage, "Usage"},
		{[]string{"--help"}, exitOK, "Commands"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"demo", "--help"}, exitOK, "Usage: sluice demo"},
		{[]string{"simulate", "--help"}, exitOK, "Usage: sluice simulate"},
		{[]string{"conformance", "--help"}, exitOK, "Usage: sluice conformance"},
		{[]string{"bench", "--help"}, exitOK, "Usage: sluice bench"},
		{[]string{"demo", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"bench"}, exitUsage, "--store is required"},
		{[]string{"bench", "--store", "redis://nohost"}, exitUsage, "not host:port"},
		{[]string{"bench", "--store", "ftp://127.0.0.1:21"}, exitUsage, "unknown scheme"},
		{[]string{"bench", "--store", "redis+sentinel://127.0.0.1:26379"}, exitUsage, "master name"},
		{[]string{"demo", "--store", "redis+sentinel://127.0.0.1:1/m"}, exitUnreachable, "could not be reached"},
		{[]string{"bench", "--store", "memory", "--algorithm", "leaky"}, exitUsage, "unknown algorithm"},
		{[]string{"demo", "--store", "memory", "--http-algorithm", "concurrency"}, exitUsage, "want a rate algorithm (fixed-window, "},
		{[]string{"demo", "--store", "memory", "--http-algorithm", "nope"}, exitUsage, "want a rate algorithm (fixed-window, "},
		{[]string{"simulate", "--pattern", "nope"}, exitUsage, "unknown pattern"},
		{[]string{"bench", "--store", "memory", "--algorithm", ","}, exitUsage, "no algorithm"},
		{[]string{"bench", "--store", "memory", "--algorithm", "gcra,token-bucket"}, exitUsage, "exactly one algorithm"},
		{[]string{"simulate", "--algorithms", " , "}, exitUsage, "no algorithm"},
		{[]string{"simulate", "--limit", "1000000", "--duration", "24h"}, exitUsage, "at most 1000000"},
		{[]string{"simulate", "--limit", "0"}, exitUsage, "Limit"},
		{[]string{"demo", "--store", "redis://127.0.0.1:1"}, exitUnreachable, "could not be reached"},
		{[]string{"conformance", "--store", "memcache://127.0.0.1:1"}, exitUnreachable, "could not be reached"},
		{[]string{"conformance", "--store", "memory", "--clock-skew", "0"}, exitUsage, "--clock-skew must be positive"},
		{[]string{"simulate", "--pool", "--limit", "-3"}, exitUsage, "--pool does not read --limit"},
		{[]string{"simulate", "--regions", "--pattern", "nope"}, exitUsage, "--regions does not read --pattern"},
		{[]string{"simulate", "--pool", "--regions"}, exitUsage, "choose one"},
		{[]string{"simulate", "--sync-period", "1s"}, exitUsage, "--sync-period is for --regions"},
		{[]string{"simulate", "--pattern", "steady", "--seed", "5"}, exitUsage, "--seed is for the patterns retry-storm, tenants: steady draws nothing at random"},
		{[]string{"conformance", "--store", "memory", "--timeout", "-1s"}, exitUsage, "--timeout"},
		{[]string{"demo", "--store", "memory", "--limit", "2"}, exitUsage, "--limit must be at least 3"},
	}
	for _, tt := range tests {
		code, out, errOut := sluice(t, tt.args...)
		if code != tt.code || !strings.Contains(out+errOut, tt.says) {
			t.Errorf("sluice %q: exit %d, want %d saying %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.says, out, errOut)
		}
	}
}

// A store that accepts connections and never answers must not hang the
// command: it reports unreachable within its deadline.
func TestUnreachableWithinDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	for _, scheme := range []string{"redis", "valkey", "memcache"} {
		start := time.Now()
		code, out, errOut := sluice(t, "bench", "--store", scheme+"://"+ln.Addr().String())
		if code != exitUnreachable {
			t.Errorf("%s: exit %d, want %d\n%s%s", scheme, code, exitUnreachable, out, errOut)
		}
		if took := time.Since(start); took > dialTimeout+3*time.Second {
			t.Errorf("%s: took %s to give up; the deadline is %s", scheme, took, dialTimeout)
		}
	}
}

// A store that answers the first ping with an error (a cluster URL to a
// server that is not one) is reported as answering with an error, not as
// silent.
func TestStoreThatAnswersWithAnError(t *testing.T) {
	addr := testenv.RedisAddr(t)
	code, out, errOut := sluice(t, "demo", "--store", "redis+cluster://"+addr)
	if code != exitUnreachable || !strings.Contains(errOut, "answered with an error") || strings.Contains(errOut, "did not answer") {
		t.Errorf("a cluster URL to a plain redis-server: exit %d, want %d saying it answered with an error\nstdout: %s\nstderr: %s", code, exitUnreachable, out, errOut)
	}
}

// failingWriter fails every write, as a full disk (/dev/full) does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A command whose output could not be written failed: a script that saves
// its table must not take an empty file for a run that went well.
func TestOutputWriteErrorFails(t *testing.T) {
	var errOut bytes.Buffer
	for _, args := range [][]string{{"simulate", "--out", ""}, {"--help"}, {"simulate", "--help"}} {
		errOut.Reset()
		code := run(context.Background(), args, failingWriter{}, &errOut)
		if code != exitFailed || !strings.Contains(errOut.String(), "no space left on device") {
			t.Errorf("sluice %q: exit %d, stderr %q; want exit %d naming the write error", args, code, errOut.String(), exitFailed)
		}
	}
}
