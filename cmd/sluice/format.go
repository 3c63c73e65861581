package main

import (
	"strconv"
	"time"
)

// round keeps three significant digits of d, which is all a reader of a
// latency or a wait needs: 863.904218ms prints as 864ms, 1.2814s as 1.28s.
// From 1000s up it keeps whole seconds.
func round(d time.Duration) time.Duration {
	for u := time.Duration(1); ; u *= 10 {
		if d.Abs() < 1000*u || u == time.Second {
			return d.Round(u)
		}
	}
}

// count is "1 key", "2 keys": n and word, plural unless n is one.
func count(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// rate prints a rate given per second in the first of /s, /min and /h in
// which it reaches 10 (or per hour): whole units from 10, two significant
// digits below. A long window's rates printed per second all read "0/s".
func rate(perSecond float64) string {
	v, unit := perSecond, "/s"
	if v < 10 {
		v, unit = perSecond*60, "/min"
	}
	if v < 10 {
		v, unit = perSecond*3600, "/h"
	}
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64) + unit
	}
	return strconv.FormatFloat(v, 'g', 2, 64) + unit
}
