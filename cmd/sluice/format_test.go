package main

import (
	"testing"
	"time"
)

func TestRound(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                      "0s",
		999 * time.Nanosecond:                  "999ns",
		1234 * time.Nanosecond:                 "1.23µs",
		863904218 * time.Nanosecond:            "864ms",
		1281400 * time.Microsecond:             "1.28s",
		-1281400 * time.Microsecond:            "-1.28s",
		90*time.Minute + 1234*time.Millisecond: "1h30m1s",
		time.Duration(1<<63 - 1):               "2562047h47m16.854775807s", // no overflow
		2*time.Second + 50*time.Millisecond:    "2.05s",
	} {
		if got := round(d).String(); got != want {
			t.Errorf("round(%v) = %s, want %s", d, got, want)
		}
	}
}
