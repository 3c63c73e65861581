package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// The Processes check (once per path, with Capabilities.Processes): the
// admission of one key from separate OS processes. Every other check runs
// its fleet in the test's own process, where a lock that holds only within
// a process (a mutex in front of a read and a write that are not atomic on
// the server) serializes the fleet's calls and hides the race; from
// several processes it over-admits.
//
// The test binary runs itself again, processCount times, with -test.run
// naming the test that called Run and processEnv holding a processSpec:
// that Run then makes no subtests, but builds one client of the backend
// and a Limiter per algorithm, says it is ready, waits for the word, makes
// its calls, and prints what it admitted (processResultPrefix).

const (
	processEnv          = "SLUICE_CONFORMANCE_PROCESS"
	processReady        = "sluice-conformance-process-ready"
	processResultPrefix = "sluice-conformance-process-result: "
	// processCount processes of processGoroutines goroutines each make
	// processCalls calls per algorithm: 180 for a quota of 20.
	processCount      = 3
	processGoroutines = 6
	processCalls      = 60
	// processTimeout bounds a process's whole life, as does the test's
	// own deadline when it comes sooner.
	processTimeout = 2 * time.Minute
)

// processPolicy has a quota of 20 for every algorithm, and windows so long
// that nothing refills while the processes run.
func processPolicy() core.Policy {
	return core.Policy{Name: "processes", Limit: 20, Window: 24 * time.Hour, Burst: 20, MaxDelay: time.Microsecond, LeaseTTL: 24 * time.Hour}
}

// processSpec is what the parent tells each process.
type processSpec struct {
	Test    string   // the name of the test that called Run
	Ordinal int      // which of that test's calls of Run
	Script  bool     // the path
	ID      string   // the identity's prefix: each algorithm adds its name
	Algs    []string // the algorithms, by name
	// Deadline (Unix ns) is when the process must be gone, whatever it is
	// doing: the parent's own deadline. Its -test.timeout says as much,
	// but counts from its own start, later by the time it takes to start.
	Deadline int64
}

// processResult is what a process reports.
type processResult struct {
	Admitted  map[string]int64
	Contended int
	Errors    []string
}

// runs counts the calls of Run in each run of a test (a *testing.T): the
// parent and its processes count alike, so a process finds the Run the
// parent meant when one test calls it more than once. Per run, not per
// name: under -count=2 the parent's second run counts from 1 again, as
// its processes (-test.count=1) do.
var runs struct {
	mu sync.Mutex
	n  map[*testing.T]int
}

func runOrdinal(t *testing.T) int {
	runs.mu.Lock()
	defer runs.mu.Unlock()
	if runs.n == nil {
		runs.n = map[*testing.T]int{}
	}
	if runs.n[t] == 0 {
		t.Cleanup(func() {
			runs.mu.Lock()
			defer runs.mu.Unlock()
			delete(runs.n, t)
		})
	}
	runs.n[t]++
	return runs.n[t]
}

// asProcess reports whether this test binary runs as one of a Processes
// check's processes; if so, the Run it is the process of has done its part.
func asProcess(t *testing.T, ordinal int, newHarness func(t *testing.T) Harness) bool {
	v := os.Getenv(processEnv)
	if v == "" {
		return false
	}
	var spec processSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		t.Fatalf("%s: %v", processEnv, err)
	}
	if spec.Test == t.Name() && spec.Ordinal == ordinal {
		if spec.Deadline != 0 {
			time.AfterFunc(time.Until(time.Unix(0, spec.Deadline)), func() {
				fmt.Fprintln(os.Stderr, "sluice-conformance-process: the check's deadline passed")
				os.Exit(2)
			})
		}
		runProcess(t, newHarness(t), spec)
	}
	return true
}

// runProcess is one process of the Processes check.
func runProcess(t testing.TB, h Harness, spec processSpec) {
	caps := h.Capabilities()
	algs := caps.Algorithms
	if algs == nil {
		algs = algorithm.All()
	}
	s := h.NewStore(t)
	if s == nil {
		t.Fatal("NewStore returned nil")
	}
	p := processPolicy()
	type job struct {
		e  *env
		l  *core.Limiter
		id string
	}
	var jobs []job
	for _, alg := range algs {
		if alg == nil || !slices.Contains(spec.Algs, alg.Name()) {
			continue
		}
		e := &env{h: h, caps: caps, alg: alg, script: spec.Script}
		e.leaser, _ = alg.(core.Leaser)
		jobs = append(jobs, job{e, e.limiter(t, s, p, nil), spec.ID + "/" + alg.Name()})
	}
	fmt.Println(processReady)
	// The word to go: a line on stdin, once every process is ready.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the word to go: %v", err)
	}
	res := processResult{Admitted: map[string]int64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, j := range jobs {
		for range processGoroutines {
			wg.Go(func() {
				for range processCalls / processGoroutines {
					d, _, err := j.e.try(t.Context(), j.l, j.id, 1)
					mu.Lock()
					switch {
					case err == nil && d.Allowed:
						res.Admitted[j.e.alg.Name()]++
					case err == nil:
					case errors.Is(err, core.ErrContention):
						res.Contended++
					default:
						res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", j.e.alg.Name(), err))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(processResultPrefix + string(b))
}

// checkProcesses runs processCount processes of this test binary on one
// key per algorithm, and holds what they admitted in all to the quota.
func checkProcesses(t testing.TB, test string, ordinal int, h Harness, algs []core.Algorithm, script bool) {
	if !h.Capabilities().Processes {
		t.Skip("Capabilities.Processes is not set: NewStore in another process of this test may not reach the same backend (an in-process store, or a server the test starts itself)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("the test binary cannot be found to run it again: %v", err)
	}
	p := processPolicy()
	spec := processSpec{Test: test, Ordinal: ordinal, Script: script, ID: fmt.Sprintf("%s#%016x", t.Name(), rand.Uint64())}
	s := h.NewStore(t)
	byName := map[string]*env{}
	for _, e := range pathEnvs(h, algs, script, p) {
		spec.Algs = append(spec.Algs, e.alg.Name())
		byName[e.alg.Name()] = e
		forget(t, e.limiter(t, s, p, nil), spec.ID+"/"+e.alg.Name())
	}
	if len(spec.Algs) == 0 {
		t.Skip("no algorithm runs on this path")
	}
	// The processes live no longer than the test may (-test.timeout), nor
	// than processTimeout.
	life := processTimeout
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := dt.Deadline(); ok {
			life = min(life, time.Until(dl))
		}
	}
	if life < time.Second {
		// Cut short by the test's own deadline, the check says nothing
		// of the store.
		t.Skipf("the test's deadline is %v away: too close to start the processes (give the test a longer -timeout)", life.Round(time.Millisecond))
	}
	spec.Deadline = time.Now().Add(life).UnixNano()
	v, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), life)
	defer cancel()
	type proc struct {
		cmd    *exec.Cmd
		signal func() error
		out    *strings.Builder
		ready  chan struct{}
		done   chan struct{} // its output read to the end
		waited bool
	}
	procs := make([]*proc, processCount)
	wait := func(pr *proc) error {
		<-pr.done
		pr.waited = true
		return pr.cmd.Wait()
	}
	// Whatever ends the check, no process outlives it: each is killed
	// (the context) and reaped. One whose parent dies without this (a
	// -test.timeout panic, a kill) ends by its own -test.timeout, the
	// parent's deadline.
	defer func() {
		cancel()
		for _, pr := range procs {
			if pr != nil && !pr.waited {
				_ = wait(pr)
			}
		}
	}()
	for i := range procs {
		cmd := exec.CommandContext(ctx, exe, "-test.run="+runPattern(test), "-test.count=1", "-test.timeout="+life.String())
		cmd.Env = append(os.Environ(), processEnv+"="+string(v))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = cmd.Stdout
		pr := &proc{cmd: cmd, out: &strings.Builder{}, ready: make(chan struct{}), done: make(chan struct{})}
		pr.signal = func() error {
			_, err := stdin.Write([]byte("go\n"))
			return err
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting process %d: %v", i, err)
		}
		go func() {
			defer close(pr.done)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			readied := false
			for sc.Scan() {
				line := sc.Text()
				pr.out.WriteString(line + "\n")
				if !readied && strings.TrimSpace(line) == processReady {
					readied = true
					close(pr.ready)
				}
			}
		}()
		procs[i] = pr
	}
	for i, pr := range procs {
		select {
		case <-pr.ready:
		case <-pr.done:
			_ = wait(pr)
			t.Fatalf("process %d ended before it was ready (%v):\n%s", i, pr.cmd.ProcessState, tail(pr.out.String()))
		case <-ctx.Done():
			t.Fatalf("process %d was not ready within %v", i, life.Round(time.Millisecond))
		}
	}
	for i, pr := range procs {
		if err := pr.signal(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	total := map[string]int64{}
	contended := 0
	for i, pr := range procs {
		werr := wait(pr)
		var res *processResult
		for _, line := range strings.Split(pr.out.String(), "\n") {
			if r, ok := strings.CutPrefix(line, processResultPrefix); ok {
				res = new(processResult)
				if err := json.Unmarshal([]byte(r), res); err != nil {
					t.Fatalf("process %d: %v", i, err)
				}
			}
		}
		if res == nil {
			t.Fatalf("process %d reported nothing (%v):\n%s", i, werr, tail(pr.out.String()))
		}
		for name, n := range res.Admitted {
			total[name] += n
		}
		contended += res.Contended
		if len(res.Errors) > 0 {
			t.Errorf("process %d: %d calls failed; first: %s", i, len(res.Errors), res.Errors[0])
		}
	}
	if contended > 0 {
		t.Logf("%d calls gave up on contention", contended)
	}
	calls := processCount * processCalls / processGoroutines * processGoroutines
	t.Logf("admitted on one key by %d OS processes, %d calls each: %v", processCount, calls/processCount, total)
	for _, name := range spec.Algs {
		e := byName[name]
		q := e.quota(p)
		switch got := total[name]; {
		case got > q:
			t.Errorf("%s: OVER-ADMISSION from %d OS processes: %d of %d calls on one key admitted, quota %d", name, processCount, got, calls, q)
		case got < q && contended == 0:
			t.Errorf("%s: %d of %d calls from %d OS processes on one key admitted, fewer than the quota of %d, with no call failed", name, got, calls, processCount, q)
		}
	}
}

// runPattern is a -test.run pattern that selects the test named name, and
// none of its siblings.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// tail is the end of a process's output, for a failure's message.
func tail(s string) string {
	const max = 4000
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}
