package echov4_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No request leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
