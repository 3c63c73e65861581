package algorithm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func loadLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time.LoadLocation(%q): %v (is tzdata installed?)", name, err)
	}
	return l
}

// TestCalendarBounds: periods start at local midnight (the 1st, for a
// month), have their real length, and tile time with no gap or overlap,
// across changes of daylight saving time and in a zone that skips
// midnight.
func TestCalendarBounds(t *testing.T) {
	berlin := loadLoc(t, "Europe/Berlin")
	ny := loadLoc(t, "America/New_York")
	santiago := loadLoc(t, "America/Santiago")
	hour := int64(time.Hour / time.Microsecond)
	cases := []struct {
		name   string
		c      Calendar
		at     time.Time
		start  time.Time
		length int64 // µs
	}{
		{"berlin spring day (23h)", Calendar{Day, berlin}, time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), 23 * hour},
		{"berlin autumn day (25h)", Calendar{Day, berlin}, time.Date(2026, 10, 25, 23, 59, 59, 0, berlin), time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), 25 * hour},
		{"new york ordinary day", Calendar{Day, ny}, time.Date(2026, 7, 4, 0, 0, 0, 0, ny), time.Date(2026, 7, 4, 0, 0, 0, 0, ny), 24 * hour},
		{"utc default", Calendar{Day, nil}, time.Date(2026, 7, 4, 23, 59, 59, 999999000, time.UTC), time.Date(2026, 7, 4, 0, 0, 0, 0, time.UTC), 24 * hour},
		{"february leap", Calendar{Month, berlin}, time.Date(2028, 2, 29, 23, 0, 0, 0, berlin), time.Date(2028, 2, 1, 0, 0, 0, 0, berlin), 29 * 24 * hour},
		{"february", Calendar{Month, time.UTC}, time.Date(2026, 2, 14, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), 28 * 24 * hour},
		{"january", Calendar{Month, time.UTC}, time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 31 * 24 * hour},
		{"march with DST (31d - 1h)", Calendar{Month, berlin}, time.Date(2026, 3, 31, 0, 0, 0, 0, berlin), time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), 31*24*hour - hour},
	}
	for _, tc := range cases {
		_, s, e, _ := tc.c.Bounds(tc.at.UnixMicro())
		if s != tc.start.UnixMicro() || e-s != tc.length {
			t.Errorf("%s: period [%s, +%s), want [%s, +%s)", tc.name, time.UnixMicro(s).In(tc.at.Location()), core.Micros(e-s), tc.start, core.Micros(tc.length))
		}
	}
	// Santiago skips midnight when daylight saving time starts (00:00 is
	// 01:00): the periods still tile time, each holding the instants it
	// says, hour by hour through the transitions of two years.
	for _, c := range []Calendar{{Day, santiago}, {Day, berlin}, {Month, santiago}} {
		from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		for now := from; now < from+2*365*24*hour; now += hour - 1 {
			p, s, e, a := c.Bounds(now)
			if !(p < s && s <= now && now < e && e < a) {
				t.Fatalf("%v at %s: bounds %d %d %d %d do not hold now", c, time.UnixMicro(now).In(c.Location), p, s, e, a)
			}
			if _, s2, e2, _ := c.Bounds(e); s2 != e || e2 != a {
				t.Fatalf("%v at %s: the next period does not start where this one ends", c, time.UnixMicro(now))
			}
			if got := time.UnixMicro(s).In(c.Location); got.Hour() > 1 || (c.Period == Month && got.Day() != 1) {
				t.Fatalf("%v: a period starts at %s", c, got)
			}
		}
	}
}

// A zone whose clock goes back across midnight has midnight twice (Gaza,
// 2021-10-29: 01:00 in summer time became 00:00): the day starts at the
// first, runs 25 hours, and every instant of the date lies in it.
func TestCalendarMidnightTwice(t *testing.T) {
	gaza := loadLoc(t, "Asia/Gaza")
	c := Calendar{Day, gaza}
	first := time.Date(2021, 10, 28, 21, 0, 0, 0, time.UTC) // 00:00 +03:00
	at := first.Add(30 * time.Minute)                       // 00:30 +03:00, Oct 29
	if y, m, d := at.In(gaza).Date(); y != 2021 || m != 10 || d != 29 {
		t.Fatalf("the test's instant is %s, not on Oct 29", at.In(gaza))
	}
	_, s, e, _ := c.Bounds(at.UnixMicro())
	if s != first.UnixMicro() || e-s != 25*int64(time.Hour/time.Microsecond) {
		t.Errorf("Oct 29 in Gaza, at %s: period [%s, %s), want [%s, +25h)", at.In(gaza), time.UnixMicro(s).In(gaza), time.UnixMicro(e).In(gaza), first.In(gaza))
	}
	// The day before ends where this one starts: 24 hours, not 26.
	_, s, e, _ = c.Bounds(first.Add(-time.Hour).UnixMicro())
	if e != first.UnixMicro() {
		t.Errorf("Oct 28 in Gaza: period [%s, %s), want it to end at %s", time.UnixMicro(s).In(gaza), time.UnixMicro(e).In(gaza), first.In(gaza))
	}
}

// A zone that skips a whole date (Pacific/Apia went from 2011-12-29 to
// 2011-12-31) has no period for it: the day before is one period, up to
// the first instant of the day after, and the periods around it still
// tile time. So does a period that began before the epoch (1970-01-01 in
// Berlin began at 23:00 UTC the day before): it starts at 0, where the
// steps clamp the clock, and its count holds.
func TestCalendarSkippedDateAndTheEpoch(t *testing.T) {
	hour := int64(time.Hour / time.Microsecond)
	for _, zone := range []string{"Pacific/Apia", "Pacific/Kwajalein", "Pacific/Kiritimati", "Pacific/Fakaofo"} {
		loc := loadLoc(t, zone)
		c := Calendar{Day, loc}
		from := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		for now := from; now < time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(); now += hour - 7 {
			p, s, e, a := c.Bounds(now)
			if !(p < s && s <= now && now < e && e < a) {
				t.Fatalf("%s at %s: bounds %s %s %s %s do not hold now", zone, time.UnixMicro(now).In(loc),
					time.UnixMicro(p).In(loc), time.UnixMicro(s).In(loc), time.UnixMicro(e).In(loc), time.UnixMicro(a).In(loc))
			}
			if e-s > 25*hour {
				t.Fatalf("%s at %s: a day of %s", zone, time.UnixMicro(now).In(loc), core.Micros(e-s))
			}
			if _, s2, e2, _ := c.Bounds(e); s2 != e || e2 != a {
				t.Fatalf("%s at %s: the next period does not start where this one ends", zone, time.UnixMicro(now).In(loc))
			}
			if got := time.UnixMicro(s).In(loc); got.Hour() > 1 {
				t.Fatalf("%s: a period starts at %s", zone, got)
			}
		}
	}
	apia := loadLoc(t, "Pacific/Apia")
	p := &core.Policy{Name: "day", Limit: 10, Window: 24 * time.Hour}
	if n := admittedAt(Calendar{Day, apia}, p, time.Date(2011, 12, 29, 0, 30, 0, 0, apia), time.Date(2011, 12, 29, 5, 0, 0, 0, apia), time.Date(2011, 12, 29, 23, 0, 0, 0, apia)); n != 10 {
		t.Errorf("Apia, 2011-12-29: %d admitted over the day under 10 a day", n)
	}
	berlin := loadLoc(t, "Europe/Berlin")
	if n := admittedAt(Calendar{Day, berlin}, p, time.Date(1970, 1, 1, 0, 30, 0, 0, berlin), time.Date(1970, 1, 1, 9, 0, 0, 0, berlin)); n != 10 {
		t.Errorf("Berlin, 1970-01-01: %d admitted over the day under 10 a day", n)
	}
}

// admittedAt steps c ten times at each instant, on one state, and counts
// the admissions.
func admittedAt(c Calendar, p *core.Policy, at ...time.Time) int {
	var state []byte
	admitted := 0
	for _, t := range at {
		for range 10 {
			next, _, d := c.Step(state, t.UnixMicro(), 1, p)
			if d.Allowed {
				admitted++
				state = append(state[:0], next...)
			}
		}
	}
	return admitted
}

// TestCalendarStep: the quota holds per period and resets exactly at the
// period's end; a state of an earlier period reads as fresh; a lowered
// limit refuses what the period already spent.
func TestCalendarStep(t *testing.T) {
	berlin := loadLoc(t, "Europe/Berlin")
	c := Calendar{Day, berlin}
	p := core.Policy{Name: "day", Limit: 3, Window: 24 * time.Hour}
	midnight := time.Date(2026, 3, 29, 0, 0, 0, 0, berlin).UnixMicro()
	var state []byte
	step := func(now, n int64) core.Decision {
		next, _, d := c.Step(state, now, n, &p)
		if next != nil {
			state = next
		}
		return d
	}
	for i := range 3 {
		if d := step(midnight-3+int64(i), 1); !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("call %d before midnight: %+v", i, d)
		}
	}
	d := step(midnight-1, 1)
	if d.Allowed || d.RetryAfter != time.Microsecond {
		t.Fatalf("4th call 1µs before midnight: %+v, want refused, RetryAfter 1µs", d)
	}
	if d := step(midnight, 3); !d.Allowed || d.Remaining != 0 || d.ResetAfter != 23*time.Hour {
		t.Fatalf("at midnight: %+v, want 3 admitted, reset after 23h (a spring day)", d)
	}
	if d := step(midnight+int64(time.Hour/time.Microsecond), 1); d.Allowed {
		t.Fatalf("an hour later: %+v, want refused", d)
	}
	low := core.Policy{Name: "day", Limit: 2, Window: 24 * time.Hour}
	if _, _, d := c.Step(state, midnight+5, 1, &low); d.Allowed || d.Remaining != 0 {
		t.Fatalf("limit lowered to 2 after 3 were admitted: %+v, want refused with 0 remaining", d)
	}
	high := core.Policy{Name: "day", Limit: 5, Window: 24 * time.Hour}
	if _, _, d := c.Step(state, midnight+5, 3, &high); d.Allowed {
		t.Fatalf("limit raised to 5 after 3: a cost of 3 was admitted (%+v): more than 5 in one day", d)
	}
	if _, _, d := c.Step(state, midnight+5, 2, &high); !d.Allowed {
		t.Fatalf("limit raised to 5 after 3: a cost of 2 was refused (%+v)", d)
	}
}

// A zone is named (an IANA zone) so that every host decides the same
// periods: time.Local is each host's own zone, and two hosts with
// different TZ settings would each count their own day on one key.
func TestCalendarRefusesTheLocalZone(t *testing.T) {
	p := &core.Policy{Name: "daily", Limit: 10, Window: 24 * time.Hour}
	err := Calendar{Period: Day, Location: time.Local}.CheckPolicy(p)
	if !errors.Is(err, core.ErrInvalidPolicy) || !strings.Contains(err.Error(), "time.LoadLocation") {
		t.Fatalf("a calendar day in time.Local: %v; want ErrInvalidPolicy saying to name the zone", err)
	}
	for _, loc := range []*time.Location{nil, time.UTC, time.FixedZone("UTC+2", 2*3600)} {
		if err := (Calendar{Period: Day, Location: loc}).CheckPolicy(p); err != nil {
			t.Errorf("a calendar day in %v: %v", loc, err)
		}
	}
	if berlin, err := time.LoadLocation("Europe/Berlin"); err == nil {
		if err := (Calendar{Period: Month, Location: berlin}).CheckPolicy(p); err != nil {
			t.Errorf("a calendar month in Europe/Berlin: %v", err)
		}
	}
}
