package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/store"
)

const conformanceSynopsis = `Runs Sluice's conformance suite (package conformance: no over-admission
under concurrency, agreement with each algorithm's Go step, honest Retry-After,
bad input rejected with nothing written, Reset) against a live store, without
writing Go, and prints a pass/fail table per algorithm and path ("script" is
the Lua twin run by a Redis or Valkey server, "generic" the read-modify-write
every store has). It writes keys under the prefix sluice-conformance, for
identities of its own (the check's name and a random suffix), and deletes them
at the end when the store can delete, also when --timeout or Ctrl-C cuts the
suite short (in the time --timeout leaves, or a moment after Ctrl-C: it says
how many it could not).`

// childEnv carries the store to a re-executed copy of this binary, which runs
// the suite under package testing (the suite reports through *testing.T).
// deadlineEnv carries the instant, in ns since the epoch, at which the copy
// is to time out: its -test.timeout is set from it once the copy has
// reached the store, so that the time it took to start and connect counts.
const (
	childEnv    = "SLUICE_CONFORMANCE_STORE"
	deadlineEnv = "SLUICE_CONFORMANCE_DEADLINE"
)

func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("conformance", conformanceSynopsis, stdout)
	spec := fs.String("store", "", "store to test (required): memory, embedded, redis://…, valkey://…, memcache://…")
	run := fs.String("run", "", "only the algorithms, or else the checks, whose name matches this `regexp`; algorithm/check for both (e.g. gcra, Admission, gcra/Admission$)")
	verbose := fs.Bool("v", false, "print the suite's whole output")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (the whole command: connecting, the suite, and the last look at the store)")
	skew := fs.Duration("clock-skew", time.Second, "clock skew between instances that a store shared over the network must tolerate (positive; the memory store has one clock); by default the store's own (a URL's clock_skew, 1s)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *spec == "" {
		return usagef("--store is required")
	}
	if *skew <= 0 || *skew > time.Hour {
		return usagef("--clock-skew must be positive and at most 1h")
	}
	if *timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if *run != "" {
		if _, err := regexp.Compile(*run); err != nil {
			return usagef("--run: %v", err)
		}
		if !selectsSome(*run) {
			perAlg, perPath := conformance.CheckNames()
			return usagef("--run %q selects no check: the algorithms are %s; the checks %s; and, once per path, %s",
				*run, strings.Join(algorithmNames(), ", "), strings.Join(perAlg, ", "), strings.Join(perPath, ", "))
		}
	}
	// One deadline bounds the whole command. The suite's process gets what
	// is left of it when the store has answered, less a reserve for lost's
	// last look at a store that may have gone silent.
	deadline := time.Now().Add(*timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	reserve := min(dialTimeout, *timeout/4)
	b, err := openBackend(dctx, *spec) // fail fast, exit 3, on a store that does not answer
	if err != nil {
		return err
	}
	name := b.Name
	// The suite holds the harness to the skew the store allows for: that
	// is the one to declare, and a --clock-skew that says otherwise is a
	// mistake to name here, not a failed Capabilities check.
	if s, closeStore, err := b.NewStore(); err == nil {
		if sk, ok := s.(store.ClockSkewer); ok && b.Shared {
			switch {
			case sk.ClockSkew() <= 0:
				closeStore()
				b.Close()
				return usagef("the store allows for no clock skew (clock_skew=%v): a store shared over the network decides on each instance's clock; give it one", sk.ClockSkew())
			case !given(fs, "clock-skew"):
				*skew = sk.ClockSkew()
			case *skew != sk.ClockSkew():
				closeStore()
				b.Close()
				return usagef("--clock-skew %v, but the store allows for %v (set it with the URL's clock_skew)", *skew, sk.ClockSkew())
			}
		}
		closeStore()
	}
	b.Close()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	left := time.Until(deadline) - reserve
	if left <= 0 {
		// It answered, but not in the time the command had: unreachable.
		return unreachableError{fmt.Errorf("the suite did not start within --timeout %s: the store took %s to answer", *timeout, round(*timeout-time.Until(deadline)))}
	}
	cargs := []string{"-test.v", "-test.timeout", left.String(), "-test.count", "1"}
	if *run != "" {
		cargs = append(cargs, "-test.run", runPattern(*run))
	}
	// The process ends itself at its -test.timeout, counted from its own
	// start: killed only if it has not a second after the deadline.
	rctx, cancelRun := context.WithDeadline(ctx, deadline.Add(time.Second))
	defer cancelRun()
	keyFile, err := os.CreateTemp("", "sluice-conformance-keys-")
	if err != nil {
		return err
	}
	keyFile.Close()
	defer os.Remove(keyFile.Name())
	cmd := exec.CommandContext(rctx, self, cargs...)
	cmd.Env = append(os.Environ(), childEnv+"="+*spec, "SLUICE_CONFORMANCE_SKEW="+skew.String(),
		deadlineEnv+"="+strconv.FormatInt(deadline.Add(-reserve).UnixNano(), 10), keysEnv+"="+keyFile.Name())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	fmt.Fprintf(stdout, "conformance suite against %s…\n", name)
	start := time.Now()
	runErr := cmd.Run()
	results := parseTestOutput(out.Bytes())
	if *verbose {
		_, _ = stdout.Write(out.Bytes())
	}
	if interrupted(ctx, runErr) {
		// Ctrl-C: the suite's process got the signal too, or was ended by
		// the command, and ran none of its cleanups.
		if len(results) > 0 {
			printTable(stdout, results)
		}
		finished, running := interruptedAt(out.Bytes())
		msg := fmt.Sprintf("%d of the suite's checks had finished", finished)
		if running != "" {
			msg += ", and " + running + " was still running"
		}
		if keys := readKeyLog(keyFile.Name()); len(keys) > 0 {
			// The keys it noted are deleted here, in the moment the
			// interrupt leaves the command.
			cctx, cancelClean := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
			left, _ := lost(cctx, *spec, keys)
			cancelClean()
			if left > 0 {
				msg += "; " + keysLeft(left)
			}
		}
		return interruptedError{msg}
	}
	timedOut := bytes.Contains(out.Bytes(), []byte("panic: test timed out after")) || // its own -test.timeout
		!time.Now().Before(deadline.Add(-reserve)) && ctx.Err() == nil // its deadline passed before the suite could say so
	if runErr != nil && timedOut {
		// The child's own deadline: its goroutine dump says nothing about
		// the store.
		if len(results) > 0 {
			printTable(stdout, results)
		}
		// Its cleanups did not run: the keys it noted are deleted here.
		left, err := lost(dctx, *spec, readKeyLog(keyFile.Name()))
		var gone unreachableError
		if left > 0 && errors.As(err, &gone) {
			return unreachableError{fmt.Errorf("%w; %s", gone.err, keysLeft(left))}
		}
		if err != nil {
			return err
		}
		finished, running := cutShort(out.Bytes())
		msg := fmt.Sprintf("the suite did not finish within --timeout %s: %d of its checks had finished", *timeout, finished)
		if running != "" {
			msg += ", and " + running + " was still running"
		}
		if left > 0 {
			msg += "; " + keysLeft(left)
		}
		return errors.New(msg + "; the default is 10m, and the whole suite takes about half a minute against a local redis-server")
	}
	if len(results) == 0 {
		_, _ = stderr.Write(out.Bytes())
		return fmt.Errorf("the suite ran no check (%v)", runErr)
	}
	failed := printTable(stdout, results)
	printSkips(stdout, parseSkips(out.Bytes()))
	fmt.Fprintf(stdout, "\n%s in %s\n", map[bool]string{true: "FAIL", false: "PASS"}[failed || runErr != nil], round(time.Since(start)))
	if failed || runErr != nil {
		if !*verbose {
			fmt.Fprintln(stdout, "\nfailures:")
			printFailures(stdout, out.Bytes())
		}
		if _, err := lost(dctx, *spec, nil); err != nil {
			return err
		}
		return errFailed
	}
	return nil
}

// lost asks the store of spec again after a run that failed or did not
// finish: one that no longer answers (gone, or silent) failed no check of
// its own, and the run exits as for a store that never answered. One that
// answers has keys deleted, as far as ctx allows; lost returns how many
// are left.
func lost(ctx context.Context, spec string, keys []store.Key) (int, error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 100*time.Millisecond {
		return len(keys), nil // no time left to ask fairly: say nothing of the store
	}
	b, gone := askAgain(ctx, spec)
	if b != nil {
		defer b.Close()
		return deleteKeys(ctx, b, keys), nil
	}
	if gone != nil {
		return len(keys), unreachableError{fmt.Errorf("the store stopped answering during the suite, so what the suite reported says nothing of its conformance: %w", gone)}
	}
	return len(keys), nil
}

// askAgain opens the store of spec again after a run in which it failed:
// it returns the backend when the store answers, and otherwise, when the
// store no longer answers (gone, or silent), why; nil and nil for a store
// that answered with an error of another kind.
func askAgain(ctx context.Context, spec string) (*backend, error) {
	b, err := openBackend(ctx, spec)
	if err == nil {
		return b, nil
	}
	var gone unreachableError
	if errors.As(err, &gone) {
		return nil, gone.err
	}
	return nil, nil
}

// interrupted reports whether Ctrl-C ended the suite: the command's
// context is done, or the suite's process died of SIGINT, which reaches it
// first when a terminal sends it to both.
func interrupted(ctx context.Context, runErr error) bool {
	if ctx.Err() != nil {
		return true
	}
	var ee *exec.ExitError
	if !errors.As(runErr, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// interruptedAt reads the output of a suite that an interrupt ended: how
// many checks had finished, and the check that was running, or "" when the
// output does not say. Package testing lists no running test then, but the
// suite runs one check at a time (conformance.Run uses no t.Parallel): the
// last to start was the one running.
func interruptedAt(out []byte) (finished int, running string) {
	finished, _ = cutShort(out)
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "=== RUN   "); ok {
			last = strings.TrimSpace(name)
		}
	}
	if last == "" {
		return finished, ""
	}
	// cutShort counted it: with no list of running tests, every test
	// started with none started below it had finished.
	finished--
	if name, ok := strings.CutPrefix(last, "TestConformance/"); ok {
		return finished, name
	}
	return finished, ""
}

// keysLeft says that up to n keys of a run cut short may be left: the
// keys noted that could not be deleted, some of which the checks' own
// cleanups had deleted, or the checks never wrote.
func keysLeft(n int) string {
	return fmt.Sprintf("up to %d keys it wrote under sluice-conformance may be left, to expire with their TTLs (a day at most)", n)
}

// cutShort reads the output of a suite that timed out: how many checks
// had finished (those started and not among the tests package testing
// lists as running), and the check still running, with how long it had
// run ("generic/Retention (3s)"), or "" when the output does not say.
func cutShort(out []byte) (finished int, running string) {
	var started []string
	runningNow := map[string]bool{}
	inList, depth := false, -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if name, ok := strings.CutPrefix(l, "=== RUN   "); ok {
			started = append(started, strings.TrimSpace(name))
			continue
		}
		if strings.TrimSpace(l) == "running tests:" {
			inList = true
			continue
		}
		if !inList {
			continue
		}
		t := strings.TrimSpace(l)
		name, dur, ok := strings.Cut(t, " (")
		if !ok || !strings.HasPrefix(l, "\t\t") {
			inList = false
			continue
		}
		runningNow[name] = true
		if d := strings.Count(name, "/"); d > depth {
			depth, running = d, name+" (after "+dur
		}
	}
	for i, n := range started {
		leaf := true
		for _, m := range started[i+1:] {
			if strings.HasPrefix(m, n+"/") {
				leaf = false
				break
			}
		}
		if leaf && !runningNow[n] {
			finished++
		}
	}
	return finished, strings.TrimPrefix(running, "TestConformance/")
}

var (
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformance/([^/\s]+)/([^/\s]+) `)
	checkLine  = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformance/([^/\s]+)/([^/\s]+)/\S+ `)
)

// parseTestOutput maps "path/algorithm" to PASS, FAIL or SKIP: SKIP too for
// one that passed because every check of it that ran skipped.
func parseTestOutput(out []byte) map[[2]string]string {
	res := map[[2]string]string{}
	ran := map[[2]string]bool{} // a check of it ran and did not skip
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := resultLine.FindStringSubmatch(sc.Text()); m != nil {
			res[[2]string{m[2], m[3]}] = m[1]
		} else if m := checkLine.FindStringSubmatch(sc.Text()); m != nil {
			k := [2]string{m[2], m[3]}
			if _, ok := ran[k]; !ok {
				ran[k] = false
			}
			ran[k] = ran[k] || m[1] != "SKIP"
		}
	}
	for k, checked := range ran {
		if !checked && res[k] == "PASS" {
			res[k] = "SKIP"
		}
	}
	return res
}

func printTable(w io.Writer, results map[[2]string]string) (failed bool) {
	paths, algs := map[string]bool{}, map[string]bool{}
	for k, v := range results {
		paths[k[0]], algs[k[1]] = true, true
		failed = failed || v == "FAIL"
	}
	pathList := sortedKeys(paths)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nalgorithm\t%s\n", strings.Join(pathList, "\t"))
	for _, a := range sortedKeys(algs) {
		row := a
		for _, p := range pathList {
			v := results[[2]string{p, a}]
			if v == "" {
				v = "-"
			}
			row += "\t" + v
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	return failed
}

// parseSkips maps every skipped test below TestConformance ("path/algorithm"
// or "path/algorithm/check") to the reason it logged, the first line it
// logged under go test -v, which streams a test's log lines after its
// "=== RUN" (or "=== NAME", "=== CONT") line.
func parseSkips(out []byte) map[string]string {
	said := map[string]string{}
	skips := map[string]string{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "=== "):
			cur = logsOf(t, cur)
		case strings.HasPrefix(t, "--- SKIP: "):
			if f := strings.Fields(t); len(f) >= 3 {
				if name, ok := strings.CutPrefix(f[2], "TestConformance/"); ok {
					skips[name] = said[f[2]]
				}
			}
		case strings.HasPrefix(t, "--- "):
		case cur != "" && strings.HasPrefix(l, "    ") && said[cur] == "":
			// "file.go:NN: message"
			if _, msg, ok := strings.Cut(t, ": "); ok {
				said[cur] = msg
			}
		}
	}
	return skips
}

// logsOf is the test whose log lines follow the "=== RUN" (NAME, CONT)
// line t, or cur when t names none.
func logsOf(t, cur string) string {
	if f := strings.Fields(t); len(f) == 3 {
		return f[2]
	}
	return cur
}

// printSkips prints one line per skipped test with the reason the suite
// gave, so that no check is left out without saying why.
func printSkips(w io.Writer, skips map[string]string) {
	if len(skips) == 0 {
		return
	}
	names := make([]string, 0, len(skips))
	for n := range skips {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nskipped:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		why := skips[n]
		if why == "" {
			why = "(no reason given)"
		}
		fmt.Fprintf(tw, "  %s\tSKIP\t%s\n", n, why)
	}
	tw.Flush()
}

// printFailures prints what failing checks said: everything but the
// RUN/PASS bookkeeping of go test -v.
func printFailures(w io.Writer, out []byte) {
	skipped := parseSkips(out)
	cur := "" // the test whose log lines follow (see parseSkips)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "=== ") {
			cur = logsOf(t, cur)
			continue
		}
		if strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP") || t == "PASS" {
			continue
		}
		if name, ok := strings.CutPrefix(cur, "TestConformance/"); ok && strings.HasPrefix(l, "    ") && !strings.HasPrefix(t, "--- ") {
			if _, skip := skipped[name]; skip {
				continue // a skip's reason, printed under "skipped:"
			}
		}
		fmt.Fprintln(w, l)
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// conformanceChild runs the suite in this process under package testing and
// exits. It is entered when childEnv is set (see main).
func conformanceChild(spec string) {
	skew, _ := time.ParseDuration(os.Getenv("SLUICE_CONFORMANCE_SKEW"))
	ctx := context.Background()
	var deadline time.Time
	if ns, err := strconv.ParseInt(os.Getenv(deadlineEnv), 10, 64); err == nil {
		deadline = time.Unix(0, ns)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	b, err := openBackend(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitUnreachable)
	}
	defer b.Close()
	h := cliHarness{b: b, skew: skew}
	if path := os.Getenv(keysEnv); path != "" && b.Remote {
		// A store in this process ends with it: only a remote one keeps
		// the keys of a run that times out.
		if h.keys, err = openKeyLog(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(exitFailed)
		}
	}
	os.Args = append([]string{os.Args[0]}, os.Args[1:]...)
	if !deadline.IsZero() {
		// The parent's -test.timeout counted from before this process
		// started and reached the store: time out at the deadline instead.
		left := max(time.Until(deadline), time.Millisecond)
		for i := 1; i+1 < len(os.Args); i++ {
			if os.Args[i] == "-test.timeout" {
				os.Args[i+1] = left.String()
			}
		}
	}
	tests := []testing.InternalTest{{Name: "TestConformance", F: func(t *testing.T) {
		conformance.Run(t, func(t *testing.T) conformance.Harness { return harnessOf(h) })
	}}}
	testing.Main(func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) }, tests, nil, nil)
}

// cliHarness hands the suite fresh clients of the store named on the
// command line.
type cliHarness struct {
	b    *backend
	skew time.Duration
	keys *keyLog // notes the keys the suite touches, when set
}

func (h cliHarness) NewStore(t testing.TB) store.Store {
	s, closeStore, err := h.b.NewStore()
	if err != nil {
		t.Fatalf("new client of %s: %v", h.b.Name, err)
	}
	t.Cleanup(closeStore)
	if h.keys != nil {
		return h.keys.logged(s)
	}
	return s
}

// Capabilities: a store shared over the network tolerates --clock-skew
// between instances; the in-process memory store has one clock.
func (h cliHarness) Capabilities() conformance.Capabilities {
	c := conformance.Capabilities{Scripts: h.b.Scripts, Processes: h.b.Remote}
	if h.b.Shared {
		c.ClockSkew = h.skew
	} else {
		c.OneClock = true
	}
	return c
}

// runPattern is the -test.run of --run: the suite runs
// TestConformance/<path>/<algorithm>/<check>, and
// TestConformance/<path>/<check> for the checks run once per path
// (conformance.CheckNames). A pattern with a slash is algorithm/check; one
// without matches the algorithms and the once-per-path checks when it
// matches any of their names, and the per-algorithm checks otherwise (below
// the algorithms only), so that both "gcra" and "Admission" select what
// they name and nothing else.
func runPattern(run string) string {
	// go test splits -test.run at its top-level '|' before its '/': each
	// alternative gets the prefix of its own.
	alts := alternatives(run)
	for i, a := range alts {
		alts[i] = altPattern(a)
	}
	return strings.Join(alts, "|")
}

// alternatives splits a regexp at its top-level '|' (outside parentheses
// and brackets), as go test splits -test.run.
func alternatives(re string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(re); i++ {
		switch re[i] {
		case '\\':
			i++
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, re[start:i])
				start = i + 1
			}
		}
	}
	return append(out, re[start:])
}

// altPattern is runPattern for one alternative of --run.
func altPattern(run string) string {
	if strings.Contains(run, "/") {
		return "TestConformance/.*/" + run
	}
	re := regexp.MustCompile(run) // checked by the caller
	_, perPath := conformance.CheckNames()
	for _, name := range append(algorithmNames(), perPath...) {
		if re.MatchString(name) {
			return "TestConformance/.*/" + run
		}
	}
	// Only below the algorithms: "TestConformance/.*/.*/X" would also run
	// every check run once per path, whose own two levels it matches.
	quoted := make([]string, 0, len(algorithmNames()))
	for _, n := range algorithmNames() {
		quoted = append(quoted, regexp.QuoteMeta(n))
	}
	return "TestConformance/.*/^(" + strings.Join(quoted, "|") + ")$/" + run
}

// selectsSome reports whether each alternative of --run names something
// the suite runs: its part before a slash (all of it, without one) matches
// an algorithm or a check run once per path, or, without a slash, a check
// of each algorithm.
func selectsSome(run string) bool {
	for _, a := range alternatives(run) {
		if !altSelectsSome(a) {
			return false
		}
	}
	return true
}

// altSelectsSome is selectsSome for one alternative of --run.
func altSelectsSome(run string) bool {
	first, _, slash := strings.Cut(run, "/")
	re, err := regexp.Compile(first)
	if err != nil {
		return false
	}
	perAlg, perPath := conformance.CheckNames()
	names := append(algorithmNames(), perPath...)
	if !slash {
		names = append(names, perAlg...)
	}
	for _, n := range names {
		if re.MatchString(n) {
			return true
		}
	}
	return false
}

// algorithmNames is the names of the algorithms the suite runs.
func algorithmNames() []string {
	var names []string
	for _, a := range algorithm.All() {
		names = append(names, a.Name())
	}
	return names
}
