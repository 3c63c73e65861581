package memcache

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

func TestParseStatsTime(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  int64
		ok    bool
	}{
		{"STAT pid 1\r\nSTAT uptime 5\r\nSTAT time 1773501600\r\nSTAT version 1.6\r\nEND\r\n", 1773501600, true},
		{"STAT pid 1\r\nEND\r\n", 0, false},              // no time
		{"STAT time x\r\nEND\r\n", 0, false},             // not a number
		{"ERROR\r\n", 0, false},                          // not a memcached
		{"STAT time 1773501600\r\n", 0, false},           // cut short
		{"SERVER_ERROR out of memory\r\n", 0, false},     // refused
		{strings.Repeat("STAT a b\r\n", 2000), 0, false}, // endless
	} {
		got, err := parseStatsTime(bufio.NewReader(strings.NewReader(tc.reply)))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStatsTime(%.40q) = %d, %v; want %d, ok %v", tc.reply, got, err, tc.want, tc.ok)
		}
	}
}

// TestServerClockExtrapolates: a reading moves on with the monotonic
// clock, rounded up, and the latest server wins.
func TestServerClockExtrapolates(t *testing.T) {
	c := newServerClocks([]string{"a", "b"})
	at := time.Now().Add(-90 * time.Second)
	c.readings[0] = clockReading{unix: 1000, at: at, ok: true}
	c.readings[1] = clockReading{unix: 5000, at: at, ok: true}
	latest, known, stale := c.latest()
	if !known || latest != 5000+90+1 || !stale {
		t.Fatalf("latest() = %d, %v, %v; want %d, true, true (a reading 90s old)", latest, known, stale, 5000+90+1)
	}
	if newServerClocks(nil) != nil {
		t.Fatalf("no servers should give no clocks")
	}
}
