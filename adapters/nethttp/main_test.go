package nethttp

import (
	"testing"

	"go.uber.org/goleak"
)

// No request leaves a goroutine behind (a leaky-bucket wait, a lease).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
