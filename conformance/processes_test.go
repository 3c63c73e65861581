//go:build unix

package conformance

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// fileStore keeps each key's state in a file of a directory that every
// process of a test shares: a backend that other OS processes reach, with
// no server. Update reads, decides and writes the file, with a pause
// between the read and the write, as a round trip would make. Its lock is
// flock(2) on the key's own lock file, which holds across processes, or,
// with processLocal, a mutex of this process only: a race that every
// fleet in one process hides, and separate processes show.
type fileStore struct {
	dir          string
	processLocal bool
}

var processLock sync.Mutex

func (s fileStore) path(key store.Key) string {
	return filepath.Join(s.dir, hex.EncodeToString([]byte(key.String())))
}

func (s fileStore) lock(key store.Key) (func(), error) {
	if s.processLocal {
		processLock.Lock()
		return processLock.Unlock, nil
	}
	f, err := os.OpenFile(s.path(key)+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func (s fileStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := s.lock(key)
	if err != nil {
		return &store.Error{Op: "update", Err: err}
	}
	defer unlock()
	var state []byte
	if b, err := os.ReadFile(s.path(key)); err == nil && len(b) >= 8 {
		if time.Now().UnixNano() < int64(binary.BigEndian.Uint64(b)) {
			state = b[8:]
		}
	}
	time.Sleep(200 * time.Microsecond)
	next, ttl := m.Apply(state)
	if next == nil {
		return nil
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(time.Now().Add(ttl).UnixNano()))
	tmp := s.path(key) + "." + strconv.Itoa(os.Getpid()) + ".tmp"
	if err := os.WriteFile(tmp, append(b, next...), 0o600); err != nil {
		return &store.Error{Op: "update", Err: err}
	}
	if err := os.Rename(tmp, s.path(key)); err != nil {
		return &store.Error{Op: "update", Err: err}
	}
	return nil
}

func (s fileStore) Delete(_ context.Context, key store.Key) error {
	_ = os.Remove(s.path(key))
	return nil
}

type fileHarness struct{ s fileStore }

func (h fileHarness) NewStore(testing.TB) store.Store { return h.s }
func (h fileHarness) Capabilities() Capabilities {
	return Capabilities{Algorithms: []core.Algorithm{algorithm.FixedWindow{}, algorithm.GCRA{}}, OneClock: true, Processes: true}
}

// processesTest runs checkProcesses over a fileStore in a directory shared
// with the test's processes (through the environment), and returns what
// it reported; in a process of the check it does its part and returns nil.
func processesTest(t *testing.T, processLocal bool) *recorder {
	const dirEnv = "SLUICE_CONFORMANCE_TEST_FILESTORE"
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = t.TempDir()
		t.Setenv(dirEnv, dir)
	}
	h := fileHarness{fileStore{dir: dir, processLocal: processLocal}}
	test, ordinal := t.Name(), runOrdinal(t)
	if asProcess(t, ordinal, func(*testing.T) Harness { return h }) {
		return nil
	}
	return record(t, func(tb testing.TB) {
		checkProcesses(tb, test, ordinal, h, h.Capabilities().Algorithms, false)
	})
}

// A store whose lock holds only within a process passes every check whose
// fleet is in one process; from three processes it over-admits, and
// Processes says so.
func TestProcessesCatchesAProcessLocalLock(t *testing.T) {
	r := processesTest(t, true)
	if r == nil {
		return
	}
	t.Log(r)
	for _, name := range []string{"fixed-window", "gcra"} {
		if !strings.Contains(r.String(), name+": OVER-ADMISSION from 3 OS processes") {
			t.Errorf("%s: a lock of one process passed Processes:\n%s", name, r)
		}
	}
}

// The same store with a lock that holds across processes passes.
func TestProcessesPassesALockOfEveryProcess(t *testing.T) {
	r := processesTest(t, false)
	if r == nil {
		return
	}
	if r.Failed() {
		t.Errorf("a lock of every process failed Processes:\n%s", r)
	}
}

// nearDeadline is a test whose deadline is close.
type nearDeadline struct {
	testing.TB
	dl time.Time
}

func (n nearDeadline) Deadline() (time.Time, bool) { return n.dl, true }

// A test whose deadline is too close to start the processes skips
// Processes, saying why: a check that cannot run says nothing of the store
// (the suite has no false positives).
func TestProcessesSkipsNearTheDeadline(t *testing.T) {
	h := fileHarness{fileStore{dir: t.TempDir()}}
	r := record(t, func(tb testing.TB) {
		checkProcesses(nearDeadline{tb, time.Now().Add(300 * time.Millisecond)}, t.Name(), 0, h, h.Capabilities().Algorithms, false)
	})
	if r.Failed() || !r.Skipped() {
		t.Errorf("Processes with its deadline 300ms away: failed %v, skipped %v; want a skip:\n%s", r.Failed(), r.Skipped(), r)
	}
}
