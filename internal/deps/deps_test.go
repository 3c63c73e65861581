package deps

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowed is every module the root go.mod may require, direct or indirect.
// A new requirement fails TestRootRequirements: weigh it (does every user
// need it?) before adding it here, or give it a module of its own.
var allowed = []string{
	"github.com/bradfitz/gomemcache", // store/memcache
	"github.com/redis/go-redis/v9",   // store/redis
	"github.com/valkey-io/valkey-go", // store/valkey
	"github.com/sony/gobreaker/v2",   // guard: the circuit breaker; small, no dependencies of its own
	"github.com/cespare/xxhash/v2",   // go-redis
	"go.uber.org/atomic",             // valkey-go's tests' graph
	"golang.org/x/sys",               // valkey-go
	"github.com/dunglas/httpsfv",     // client reads RateLimit fields with it; tests check every header
	"go.uber.org/goleak",             // tests: goroutines return to baseline
	"golang.org/x/time",              // tests: x/time/rate is the memory store's reference
}

// maxFresh is the most modules `go list -m all` may list for a new
// application that imports core and store/redis (itself included).
const maxFresh = 20

func rootDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the repository root: %v", err)
	}
	return dir
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRootRequirements(t *testing.T) {
	out := goCmd(t, rootDir(t), "mod", "edit", "-json")
	// The JSON's "Require" entries each carry a "Path"; reading them by
	// line keeps this test free of a JSON struct that mirrors go's.
	var got []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if p, ok := strings.CutPrefix(line, `"Path": "`); ok {
			got = append(got, strings.TrimSuffix(strings.TrimSuffix(p, `",`), `"`))
		}
	}
	got = slices.DeleteFunc(got, func(p string) bool { return p == "github.com/sluicehq/sluice" })
	if len(got) == 0 {
		t.Fatal("read no requirements from the root go.mod")
	}
	for _, p := range got {
		if !slices.Contains(allowed, p) {
			t.Errorf("the root go.mod requires %s, which is not on the allow-list: every user of Sluice would pull it; give it a module of its own, or add it to the list in %s with the reason every user needs it", p, "internal/deps/deps_test.go")
		}
	}
}

func TestFreshApplicationFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("resolves a module graph with the go command")
	}
	root := rootDir(t)
	dir := t.TempDir()
	const v = "v0.0.0-00010101000000-000000000000"
	files := map[string]string{
		"go.mod": "module example.com/fresh\n\ngo 1.26.8\n\nrequire github.com/sluicehq/sluice " + v +
			"\n\nreplace github.com/sluicehq/sluice " + v + " => " + root + "\n",
		"main.go": `package main

import (
	"github.com/sluicehq/sluice/core"
	sredis "github.com/sluicehq/sluice/store/redis"
)

var _ = core.Config{Store: (*sredis.Store)(nil)}

func main() {}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd(t, dir, "mod", "tidy")
	mods := strings.Fields(goCmd(t, dir, "list", "-m", "-f", "{{.Path}}", "all"))
	if len(mods) > maxFresh {
		t.Errorf("an application that imports core and store/redis pulls %d modules, more than %d:\n%s", len(mods), maxFresh, strings.Join(mods, "\n"))
	}
	for _, m := range mods {
		for _, heavy := range []string{"gin-gonic", "labstack/echo", "gonum.org", "progressbar", "miniredis", "prometheus", "opentelemetry", "google.golang.org/grpc", "toxiproxy"} {
			if strings.Contains(m, heavy) {
				t.Errorf("an application that imports core and store/redis pulls %s", m)
			}
		}
	}
	t.Logf("core + store/redis: %d modules", len(mods))
}
