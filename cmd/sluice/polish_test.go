package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// --help prints the command's usage once, on stdout, and nothing on stderr.
func TestHelpPrintsUsageOnce(t *testing.T) {
	for _, c := range commands {
		code, out, errOut := sluice(t, c.name, "--help")
		wantCode(t, code, exitOK, out, errOut)
		if n := strings.Count(out, "Usage: sluice "+c.name); n != 1 {
			t.Errorf("%s --help printed its usage %d times:\n%s", c.name, n, out)
		}
		if errOut != "" {
			t.Errorf("%s --help wrote to stderr: %q", c.name, errOut)
		}
	}
}

// A bad flag is an error: the message and the usage go to stderr, nothing
// to stdout (which a script may be parsing).
func TestBadFlagUsageOnStderr(t *testing.T) {
	for _, c := range commands {
		code, out, errOut := sluice(t, c.name, "--bogus")
		wantCode(t, code, exitUsage, out, errOut)
		if out != "" {
			t.Errorf("%s --bogus wrote to stdout:\n%s", c.name, out)
		}
		if !strings.Contains(errOut, "flag provided but not defined: -bogus") {
			t.Errorf("%s --bogus: stderr lacks the error:\n%s", c.name, errOut)
		}
		if n := strings.Count(errOut, "Usage: sluice "+c.name); n != 1 {
			t.Errorf("%s --bogus: usage on stderr %d times, want once:\n%s", c.name, n, errOut)
		}
	}
	// No command at all is bad usage too.
	code, out, errOut := sluice(t)
	wantCode(t, code, exitUsage, out, errOut)
	if out != "" || !strings.Contains(errOut, "Usage: sluice <command>") {
		t.Errorf("no command: stdout %q, stderr %q; want the usage on stderr only", out, errOut)
	}
}

// An unknown scheme is named as such, with the schemes that are known,
// whatever else is wrong with the value.
func TestUnknownStoreScheme(t *testing.T) {
	for _, spec := range []string{"ftp://127.0.0.1:21", "ftp://nohost", "postgres://", "localhost:6379", "redis"} {
		code, out, errOut := sluice(t, "bench", "--store", spec)
		wantCode(t, code, exitUsage, out, errOut)
		if !strings.Contains(errOut, "unknown scheme") {
			t.Errorf("--store %q: %q does not say unknown scheme", spec, errOut)
		}
		for _, known := range []string{"memory", "embedded", "redis://", "rediss://", "redis+sentinel://", "valkey://", "memcache://"} {
			if !strings.Contains(errOut, known) {
				t.Errorf("--store %q: %q does not list %s", spec, errOut, known)
			}
		}
	}
}

// bench --algorithm concurrency runs with every other flag at its default,
// and, as for the rate algorithms, the default policy admits every call.
func TestBenchConcurrencyDefaults(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--algorithm", "concurrency", "--duration", "300ms")
	wantCode(t, code, exitOK, out, errOut)
	var total, admitted, denied, errs int
	i, j := strings.Index(out, "decisions   "), strings.Index(out, "admitted    ")
	if i < 0 || j < 0 {
		t.Fatalf("no counts in:\n%s", out)
	}
	_, _ = fmt.Sscanf(out[i:], "decisions   %d", &total)
	_, _ = fmt.Sscanf(out[j:], "admitted    %d, denied %d, errors %d", &admitted, &denied, &errs)
	if total == 0 || admitted != total {
		t.Errorf("%d of %d decisions admitted (denied %d, errors %d), want all:\n%s", admitted, total, denied, errs, out)
	}
}

// bench --algorithm sliding-log runs with every other flag at its
// default: the default limit is the most a sliding log takes.
func TestBenchSlidingLogDefaults(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--algorithm", "sliding-log", "--duration", "200ms")
	wantCode(t, code, exitOK, out, errOut)
}

// Counts are singular when they are one.
func TestBenchSingularCounts(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--duration", "100ms", "--keys", "1", "--concurrency", "1", "--instances", "1")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "1 caller, 1 key, 1 instance,") {
		t.Errorf("header does not say 1 caller, 1 key, 1 instance:\n%s", out)
	}
	code, out, errOut = sluice(t, "bench", "--store", "memory", "--duration", "100ms", "--keys", "2", "--concurrency", "2", "--instances", "2")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "2 callers, 2 keys, 2 instances,") {
		t.Errorf("header does not say 2 callers, 2 keys, 2 instances:\n%s", out)
	}
}

// durationRE finds what time.Duration.String prints.
var durationRE = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?(ns|µs|ms|s|m|h)\b`)

// checkRounded fails for a duration printed with more than three
// significant digits ("863.904218ms"): a reader needs no more.
func checkRounded(t *testing.T, what, out string) {
	t.Helper()
	found := false
	for _, s := range durationRE.FindAllString(out, -1) {
		found = true
		digits := strings.TrimLeft(strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, s), "0")
		if len(strings.TrimRight(digits, "0")) > 3 {
			t.Errorf("%s prints %q: more than three significant digits", what, s)
		}
	}
	if !found {
		t.Errorf("%s printed no duration:\n%s", what, out)
	}
}

func TestDurationsRounded(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--duration", "300ms", "--keys", "10")
	wantCode(t, code, exitOK, out, errOut)
	checkRounded(t, "bench", out)
	// The leaky bucket's queue gives delays of odd microseconds.
	code, out, errOut = sluice(t, "simulate", "--pattern", "tenants", "--out", "")
	wantCode(t, code, exitOK, out, errOut)
	checkRounded(t, "simulate", out)
}

// TestDemoLeakyAndRetryAfter: the demo's leaky-bucket row says that the
// admissions beyond the limit were queued (delayed), not over-admitted, and
// both parts print Retry-After the way the HTTP header carries it: whole
// seconds, rounded up.
func TestDemoLeakyAndRetryAfter(t *testing.T) {
	code, out, errOut := sluice(t, "demo", "--store", "memory")
	wantCode(t, code, exitOK, out, errOut)
	var leaky string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "leaky-bucket ") {
			leaky = line
		}
	}
	if leaky == "" {
		t.Fatalf("no leaky-bucket row:\n%s", out)
	}
	f := strings.Fields(leaky)
	admitted, _ := strconv.Atoi(f[1])
	var now, queued int
	m := regexp.MustCompile(`([0-9]+) at once, ([0-9]+) queued`).FindStringSubmatch(leaky)
	if m != nil {
		now, _ = strconv.Atoi(m[1])
		queued, _ = strconv.Atoi(m[2])
	}
	// At least the burst (25) starts at once; more may, as the queue drains
	// while the burst is under way.
	if m == nil || now < 25 || now+queued != admitted || queued == 0 {
		t.Errorf("leaky-bucket row %q: want at least 25 at once and the rest of the %d admissions queued", leaky, admitted)
	}
	if !strings.Contains(leaky, "delayed, not over-admitted") {
		t.Errorf("leaky-bucket row %q does not say the queued admissions are delayed, not over-admitted", leaky)
	}

	// Part 1's Retry-After column and part 2's header: both whole seconds.
	seconds := regexp.MustCompile(`^[1-9][0-9]*$`)
	rows := 0
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "algorithm "):
			inTable = true
			if f := strings.Fields(line); f[3] != "Retry-After" {
				t.Errorf("part 1 header %q: want the fourth column to be Retry-After", line)
			}
			continue
		case line == "" || strings.HasPrefix(line, "("):
			inTable = false
		}
		if !inTable {
			continue
		}
		rows++
		if ra := strings.Fields(line)[3]; !seconds.MatchString(ra) {
			t.Errorf("part 1 row %q: Retry-After %q, want whole seconds as the header carries them", line, ra)
		}
	}
	if rows != 7 {
		t.Errorf("part 1 table has %d rows, want 7:\n%s", rows, out)
	}
	m = regexp.MustCompile(`(?m)^  Retry-After: (\S+)$`).FindStringSubmatch(out)
	if m == nil || !seconds.MatchString(m[1]) {
		t.Errorf("part 2 prints no Retry-After in whole seconds:\n%s", out)
	}
}

// An algorithm named twice is a usage error: it would be run and reported
// twice, which reads as two contenders.
func TestAlgorithmNamedTwice(t *testing.T) {
	code, out, errOut := sluice(t, "simulate", "--algorithms", "gcra,gcra", "--out", "")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, `"gcra" is named twice`) {
		t.Errorf("stderr %q does not name the algorithm given twice", errOut)
	}
}

// bench --limit 0 is a bad limit, not the default: the default is what
// an absent --limit gets.
func TestBenchLimitZero(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--duration", "100ms", "--limit", "0")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, "--limit must be positive") {
		t.Errorf("stderr %q does not say --limit must be positive", errOut)
	}
}

// With more callers than CPUs, bench says that its max latency includes a
// caller's wait for a CPU, which an in-process store's max mostly is.
func TestBenchMaxLatencyExplained(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--duration", "100ms", "--concurrency", "1000")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "1000 callers on ") || !strings.Contains(out, "waited for a CPU") {
		t.Errorf("bench output does not say its max includes waits for a CPU:\n%s", out)
	}
}
