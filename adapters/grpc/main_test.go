package sluicegrpc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No call, server or client leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
