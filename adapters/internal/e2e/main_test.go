package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// Every instance, client, store and server a test starts is stopped by the
// test's cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
