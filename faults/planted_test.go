package faults

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core"

	"github.com/sluicehq/sluice/store"
)

// misclassifying is a planted defect: a store that reports a script whose
// reply was lost as never sent (an error matching ErrUnavailable but not
// ErrOutcomeUnknown). A caller then believes the request was not counted,
// while the server counted it.
type misclassifying struct {
	store.Store
	r store.ScriptRunner
}

func (s misclassifying) RunScript(ctx context.Context, sc *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	res, err := s.r.RunScript(ctx, sc, key, args)
	if errors.Is(err, core.ErrOutcomeUnknown) {
		return res, &store.Error{Op: "script", Err: errors.New("not sent")}
	}
	return res, err
}

// TestMatrixCatchesAMiscount shows that the matrix fails a store whose
// count the caller cannot trust: under a stall, the scripts whose replies
// were lost still ran, and the count read back from the server exceeds
// what was admitted plus what was reported unknown.
func TestMatrixCatchesAMiscount(t *testing.T) {
	redis := storeKinds[0]
	planted := storeKind{name: "planted", open: func(t testing.TB, addrs []string, cluster bool) store.Store {
		s := redis.open(t, addrs, cluster)
		return misclassifying{Store: s, r: s.(store.ScriptRunner)}
	}}
	rows := runCell(t, faults[faultIndex("stall")], planted)
	var caught bool
	for _, r := range rows {
		for _, p := range r.problems {
			caught = caught || strings.Contains(p, "but the server counted")
		}
	}
	if !caught {
		t.Fatalf("the matrix passed a store that hides unknown outcomes:%s", matrixTable(rows))
	}
}

func faultIndex(name string) int {
	for i, f := range faults {
		if f.name == name {
			return i
		}
	}
	panic("no fault " + name)
}
