package memory

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every Store
// a test creates must have its sweeper stopped by Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
