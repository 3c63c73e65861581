package prometheus

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store/memcache"
)

// promtool check rules accepts alerts.yml, and promtool test rules proves
// its hysteresis (alerts_test.yml): a 2 s blip fires nothing, a 10 min
// fallback pages.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboardExprs returns every query of dashboard.json.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.UID == "" {
		t.Fatal("dashboard.json has no uid")
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// Every query of the dashboard is valid PromQL: promtool checks them as
// recording rules, with Grafana's variables given values.
func TestDashboardQueries(t *testing.T) {
	exprs := dashboardExprs(t)
	bin := promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$policy", ".*")
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules (dashboard queries): %v\n%s\n%s", err, out, b.String())
	}
}

type casStats struct{}

func (casStats) Stats() memcache.Stats { return memcache.Stats{Updates: 1, Attempts: []uint64{0, 1}} }

// The rules and the dashboard name only metrics the Observer and the store
// collectors export: a renamed metric cannot leave an alert silent.
func TestRulesNameExportedMetrics(t *testing.T) {
	o, reg := newObserver(t, Options{})
	mem := scriptedRun(t, o)
	o.SetFallbackActive("api", false)
	o.BreakerStateChanged("redis", "closed")
	o.DenyCacheHit("api")
	for name, s := range map[string]any{"memory": mem, "memcache": casStats{}} {
		c, err := NewStoreCollector("", name, s)
		if err != nil {
			t.Fatal(err)
		}
		reg.MustRegister(c)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		exported[n] = true
		if mf.GetType().String() == "HISTOGRAM" {
			exported[n+"_bucket"], exported[n+"_sum"], exported[n+"_count"] = true, true, true
		}
	}
	re := regexp.MustCompile(`sluice_[a-z_]+`)
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	named := re.FindAllString(string(rules), -1)
	for _, e := range dashboardExprs(t) {
		named = append(named, re.FindAllString(e, -1)...)
	}
	if len(named) < 10 {
		t.Fatalf("only %d metric names found in the rules and dashboard", len(named))
	}
	for _, n := range named {
		if !exported[n] {
			t.Errorf("%s is named by the rules or the dashboard but not exported", n)
		}
	}
}
