// Command sluice is how a newcomer meets Sluice and how an operator chooses a
// backend and an algorithm:
//
//	sluice demo         three HTTP instances sharing one store, 200 requests at once
//	sluice simulate     traffic patterns through every algorithm, a table and a plot
//	sluice conformance  the conformance suite against a live store
//	sluice bench        decisions/s and latency percentiles against a store
//
// Install with `go install github.com/sluicehq/sluice/cmd/sluice@latest`.
// Every subcommand takes --help.
//
// Exit codes: 0 success; 1 the job ran and failed (a conformance check, a
// demo that admitted the wrong count); 2 bad usage (unknown flag, bad URL,
// unknown algorithm); 3 the store could not be reached (for conformance and
// demo, also a store that stopped answering during the run); 130
// interrupted (Ctrl-C), as a shell reports a command that SIGINT ended.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// Exit codes scripts can rely on.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitInterrupted = 130 // 128 + SIGINT, as a shell reports it
)

// usageError is bad input from the command line: exit 2. usage, when set,
// is the command's usage, printed after msg (a flag that did not parse).
type usageError struct{ msg, usage string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// unreachableError is a store that did not answer: exit 3.
type unreachableError struct{ err error }

func (e unreachableError) Error() string { return e.err.Error() }
func (e unreachableError) Unwrap() error { return e.err }

// interruptedError is a job that Ctrl-C (SIGINT) stopped, and what it had
// done: exit 130.
type interruptedError struct{ msg string }

func (e interruptedError) Error() string { return "interrupted: " + e.msg }

// failedError is a job that ran and failed: exit 1, message already printed.
var errFailed = errors.New("failed")

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"demo", "three HTTP instances (net/http, gin, echo) share one store; 200 requests for one client", runDemo},
	{"simulate", "replay traffic patterns through every algorithm; print a table, write a PNG plot", runSimulate},
	{"conformance", "run the conformance suite against a live store", runConformance},
	{"bench", "decisions/s and latency percentiles against a store", runBench},
}

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		conformanceChild(spec) // a re-executed copy running the suite; exits
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		topUsage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		out := &outWriter{w: stdout}
		if topUsage(out); out.err != nil {
			fmt.Fprintf(stderr, "sluice: writing the output: %v\n", out.err)
			return exitFailed
		}
		return exitOK
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		out := &outWriter{w: stdout}
		err := c.run(ctx, args[1:], out, stderr)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			if out.err != nil {
				// The job went well, but what it said was lost.
				fmt.Fprintf(stderr, "sluice %s: writing the output: %v\n", c.name, out.err)
				return exitFailed
			}
			return exitOK
		}
		var ue usageError
		var ce unreachableError
		var ie interruptedError
		switch {
		case errors.As(err, &ue) && ue.usage != "":
			fmt.Fprintf(stderr, "sluice %s: %v\n\n%s", c.name, err, ue.usage)
			return exitUsage
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "sluice %s: %v\nRun 'sluice %s --help' for usage.\n", c.name, err, c.name)
			return exitUsage
		case errors.As(err, &ie):
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return exitInterrupted
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			// Ctrl-C, which the command's context carries.
			fmt.Fprintf(stderr, "sluice %s: interrupted\n", c.name)
			return exitInterrupted
		case errors.As(err, &ce):
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return exitUnreachable
		case errors.Is(err, errFailed):
			return exitFailed
		default:
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return exitFailed
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n", args[0])
	topUsage(stderr)
	return exitUsage
}

// outWriter keeps the first error of a command's writes to its output,
// which the commands do not check line by line.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil && o.err == nil {
		o.err = err
	}
	return n, err
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "Sluice: one rate limit across a fleet of instances.")
	fmt.Fprintln(w, "\nUsage: sluice <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nStores (--store): memory (or memory://?max_keys=...), redis://host:port[/db],")
	fmt.Fprintln(w, "redis://h1:p1,h2:p2 (cluster), redis+sentinel://host:port[,host:port...]/master,")
	fmt.Fprintln(w, "valkey://host:port[,host:port...], memcache://host:port[,host:port...]")
	fmt.Fprintln(w, "\nExit codes: 0 ok, 1 failed, 2 bad usage, 3 store unreachable, 130 interrupted.")
}

// given reports whether the command line set the flag called name.
func given(fs *flagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// flagSet is a command's flags, its synopsis and where --help writes.
type flagSet struct {
	*flag.FlagSet
	name, synopsis string
	stdout         io.Writer
}

// newFlagSet returns the flags of command name. The flag package itself
// prints nothing (it would print the usage on a bad flag, to its output,
// and again for the caller): parse reports each outcome once.
func newFlagSet(name, synopsis string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis, stdout: stdout}
}

// usage is the command's synopsis and flags.
func (fs *flagSet) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: sluice %s [flags]\n\n%s\n\nFlags:\n", fs.name, fs.synopsis)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return b.String()
}

// parse parses args. -h/--help prints the usage to stdout and returns
// flag.ErrHelp (exit 0); a flag that does not parse, or a stray argument,
// is a usage error that carries the usage, for stderr (exit 2).
func (fs *flagSet) parse(args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(fs.stdout, fs.usage())
		return flag.ErrHelp
	case err != nil:
		return usageError{msg: err.Error(), usage: fs.usage()}
	case fs.NArg() > 0:
		return usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0)), usage: fs.usage()}
	}
	return nil
}
