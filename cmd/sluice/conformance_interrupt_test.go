package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Ctrl-C during the suite: the command says it was interrupted and how
// many checks had finished, as --timeout does, prints the suite's output
// only for -v, deletes the keys of the checks it cut short, and exits 130.
func TestConformanceInterrupted(t *testing.T) {
	addr := testenv.RedisAddr(t)
	count := conformanceKeys(t, addr, 12)
	before := count()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The command's context is done as main's is on SIGINT.
	interrupt := time.AfterFunc(3*time.Second, cancel)
	defer interrupt.Stop()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"conformance", "--store", "redis://" + addr + "/12"}, &out, &errOut)
	wantCode(t, code, exitInterrupted, out.String(), errOut.String())
	if !regexp.MustCompile(`^sluice conformance: interrupted: [0-9]+ of the suite's checks had finished`).MatchString(errOut.String()) {
		t.Errorf("stderr does not say the suite was interrupted and how many checks had finished:\n%s", errOut.String())
	}
	if strings.Contains(out.String()+errOut.String(), "=== RUN") {
		t.Errorf("the suite's -v output was printed, without -v:\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	if n := count() - before; n > 0 {
		t.Errorf("the interrupted run left %d keys behind in the store", n)
	}
}

// The suite's process gets a terminal's Ctrl-C too, and may die of it
// before the command's context is done: that is an interrupt as well.
func TestInterruptedBySIGINT(t *testing.T) {
	var tools []string
	for _, name := range []string{"env", "sh"} {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed: %v", name, err)
			}
			t.Skipf("%s is not installed: %v", name, err)
		}
		tools = append(tools, p)
	}
	env, sh := tools[0], tools[1]
	// env --default-signal gives the shell SIGINT's default action even
	// where this test runs with SIGINT ignored (a background job), which
	// its children would inherit.
	if err := exec.Command(env, "--default-signal=INT", sh, "-c", "kill -INT $$").Run(); !interrupted(context.Background(), err) {
		t.Errorf("a process that died of SIGINT (%v) is not an interrupt", err)
	}
	if err := exec.Command(sh, "-c", "exit 1").Run(); interrupted(context.Background(), err) {
		t.Errorf("a process that exited 1 (%v) is an interrupt", err)
	}
}

// interruptedAt counts the checks of a suite that an interrupt ended, and
// names the last one to start as running: package testing lists none.
func TestInterruptedAt(t *testing.T) {
	out := "=== RUN   TestConformance\n=== RUN   TestConformance/Capabilities\n=== RUN   TestConformance/generic\n" +
		"=== RUN   TestConformance/generic/gcra\n=== RUN   TestConformance/generic/gcra/Admission\n    run.go:60: a log line\n" +
		"=== RUN   TestConformance/generic/gcra/Steps\n=== RUN   TestConformance/generic/Retention\n"
	finished, running := interruptedAt([]byte(out))
	if finished != 3 || running != "generic/Retention" {
		t.Errorf("interruptedAt: %d finished, running %q; want 3 (Capabilities, Admission, Steps) and generic/Retention", finished, running)
	}
	if finished, running := interruptedAt(nil); finished != 0 || running != "" {
		t.Errorf("interruptedAt of no output: %d finished, running %q", finished, running)
	}
}
