// Package readme checks that the Go in README.md compiles as a newcomer
// pastes it: the Quick start as a whole program, and each HTTP door's
// snippet inside the Quick start's context.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// block is one ```go block of the README, under the heading it follows.
type block struct {
	heading string
	line    int // of the opening fence
	src     string
}

// section is what the README says under one heading, up to the next.
type section struct {
	heading string
	lines   []string
}

func readREADME(t *testing.T) (blocks []block, sections []section) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cur *block
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.src += line + "\n"
		case strings.HasPrefix(line, "#"):
			h := strings.TrimSpace(strings.TrimLeft(line, "#"))
			sections = append(sections, section{heading: h})
			continue
		case line == "```go":
			cur = &block{line: n}
			if len(sections) > 0 {
				cur.heading = sections[len(sections)-1].heading
			}
		}
		if len(sections) > 0 {
			s := &sections[len(sections)-1]
			s.lines = append(s.lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks, sections
}

// doors are the headings of the door sections, each a short snippet.
var doors = []string{"net/http", "gin", "echo v5", "echo v4"}

// TestREADMEQuickStartAndDoorsCompile: the Quick start is one complete
// program, and each door section (at most ten lines) holds a snippet that
// compiles against the Quick start's cfg, in the module a user of that
// door imports.
func TestREADMEQuickStartAndDoorsCompile(t *testing.T) {
	blocks, sections := readREADME(t)
	bySection := map[string][]block{}
	for _, b := range blocks {
		bySection[b.heading] = append(bySection[b.heading], b)
	}
	quick := bySection["Quick start"]
	if len(quick) != 1 || !strings.HasPrefix(quick[0].src, "package main\n") {
		t.Fatalf("the Quick start has %d Go blocks; want one complete program (package main)", len(quick))
	}
	if !regexp.MustCompile(`(?m)^\s*cfg :?= nethttp\.Config\{`).MatchString(quick[0].src) {
		t.Errorf("the Quick start defines no cfg (a nethttp.Config), which the door sections use")
	}
	for _, h := range doors {
		var sec *section
		for i := range sections {
			if sections[i].heading == h {
				sec = &sections[i]
			}
		}
		if sec == nil {
			t.Errorf("no README section %q", h)
			continue
		}
		lines := strings.Split(strings.TrimRight(strings.Join(sec.lines, "\n"), "\n"), "\n")
		if len(lines)+1 > 10 { // the heading counts
			t.Errorf("section %q is %d lines, want at most 10", h, len(lines)+1)
		}
		if len(bySection[h]) != 1 {
			t.Errorf("section %q has %d Go blocks, want one", h, len(bySection[h]))
		}
	}
	for _, b := range blocks {
		if b.heading != "Quick start" && !slices.Contains(doors, b.heading) {
			continue
		}
		t.Run(strings.ReplaceAll(b.heading, "/", "-"), func(t *testing.T) {
			src := b.src
			if !strings.HasPrefix(src, "package main\n") {
				src = fragment(src)
			}
			vet(t, moduleOf(src), src, b.line)
		})
	}
}

// imports maps the package names a door snippet may use to their paths.
// echo is v5, or v4 beside echov4.
var imports = map[string]string{
	"context":    "context",
	"log":        "log",
	"http":       "net/http",
	"time":       "time",
	"core":       "github.com/sluicehq/sluice/core",
	"nethttp":    "github.com/sluicehq/sluice/adapters/nethttp",
	"gin":        "github.com/gin-gonic/gin",
	"sluicegin":  "github.com/sluicehq/sluice/adapters/gin",
	"echo":       "github.com/labstack/echo/v5",
	"sluiceecho": "github.com/sluicehq/sluice/adapters/echo",
	"echov4":     "github.com/sluicehq/sluice/adapters/echov4",
}

// fragment makes a door snippet a program: the statements of its main,
// with the Quick start's cfg, importing the packages the snippet names.
func fragment(body string) string {
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for name, path := range imports {
		if name != "nethttp" && !regexp.MustCompile(`\b`+name+`\.`).MatchString(body) {
			continue
		}
		if name == "echo" && strings.Contains(body, "echov4.") {
			path = "github.com/labstack/echo/v4"
		}
		fmt.Fprintf(&b, "\t%s %q\n", name, path)
	}
	b.WriteString(")\n\n// cfg is the Quick start's.\nvar cfg nethttp.Config\n\nfunc main() {\n")
	b.WriteString(body)
	b.WriteString("}\n")
	return b.String()
}

// moduleOf is a directory of the module a program must be built in: a
// framework door's own module, else the root's (this package's directory).
func moduleOf(src string) string {
	for _, m := range []struct{ pkg, dir string }{
		{`"github.com/sluicehq/sluice/adapters/gin"`, "adapters/gin"},
		{`"github.com/sluicehq/sluice/adapters/echov4"`, "adapters/echov4"},
		{`"github.com/sluicehq/sluice/adapters/echo"`, "adapters/echo"},
	} {
		if strings.Contains(src, m.pkg) {
			return filepath.Join(root, m.dir)
		}
	}
	return "."
}

// vet writes src as a main package under dir's testdata (which ./...
// patterns skip) and runs go vet on it: a compile error or a vet finding
// fails the test.
func vet(t *testing.T, dir, src string, line int) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to compile the README with: %v", err)
	}
	td := filepath.Join(dir, "testdata")
	if _, err := os.Stat(td); os.IsNotExist(err) {
		if err := os.Mkdir(td, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(td) })
	}
	pkg, err := os.MkdirTemp(td, "readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pkg) })
	if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "vet", "./"+filepath.Join("testdata", filepath.Base(pkg)))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("README.md:%d does not compile (go vet in %s: %v):\n%s\nthe program:\n%s", line, dir, err, out, numbered(src))
	}
}

func numbered(src string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, l)
	}
	return b.String()
}
