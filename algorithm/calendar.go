package algorithm

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Period is the length of a calendar quota's window.
type Period int

const (
	// Day resets at midnight.
	Day Period = iota + 1
	// Month resets at midnight on the first of the month.
	Month
)

func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

// Calendar is a quota per calendar day or month ("10,000 per day",
// "1,000,000 per month") that resets at midnight (Day) or at midnight on the
// 1st (Month) in Location, a named IANA time zone (time.LoadLocation;
// nil means UTC; time.Local, which differs from host to host, is refused). Periods have their real length: a month of 28 to 31
// days, a day of 23 or 25 hours across a change of daylight saving time;
// where a zone skips midnight, the period starts at the first instant of
// the day that exists.
//
// Bound: at most Policy.Limit units in each period. It reads Policy.Limit
// alone: Window is not read (set it to the period's nominal length, 24h or
// 720h, for the RateLimit-Policy field), so a month is not bound by
// core.MaxWindow.
//
// State: 16 bytes, the start of the period of the newest admission (µs)
// and the units admitted in it. A state from an earlier period reads as
// fresh; one from a later period (a clock that moved backwards) keeps that
// period. A limit lowered within a period refuses until the count is
// below it; a limit raised admits up to the new limit, counting what the
// period already admitted: never more than the larger of the two.
//
// On Redis and Valkey its Lua twin runs only within a core.Multi (the
// multi-limit script), which hands it the period boundaries the client
// computed; a core.Limiter uses the generic read-modify-write path.
type Calendar struct {
	Period   Period
	Location *time.Location
}

var (
	_ core.Algorithm     = Calendar{}
	_ core.MultiScripted = Calendar{}
)

// Name is "calendar-day" or "calendar-month".
func (c Calendar) Name() string { return "calendar-" + c.Period.String() }

// Quota is Policy.Limit.
func (Calendar) Quota(p *core.Policy) int64 { return p.Limit }

// CheckPolicy rejects an unknown Period, and time.Local: each host's own
// zone (its TZ), so that hosts set apart would each count a day of their
// own on one key.
func (c Calendar) CheckPolicy(p *core.Policy) error {
	if c.Period != Day && c.Period != Month {
		return &core.PolicyError{Policy: p.Name, Field: "Algorithm", Reason: fmt.Sprintf("calendar period must be Day or Month, got %s", c.Period)}
	}
	if c.Location == time.Local {
		return &core.PolicyError{Policy: p.Name, Field: "Algorithm", Reason: "calendar Location is time.Local, which is each host's own zone: name the zone (time.LoadLocation(\"Europe/Berlin\")) so that every host counts the same days"}
	}
	return nil
}

func (c Calendar) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// start returns the first instant of the period that is off periods after
// the one holding date y-m-d: the first instant whose date, in Location,
// is that period's first date or later. A date the zone skips entirely
// (Pacific/Apia's 2011-12-30) has no instant, so its period starts where
// the next one does: it is empty, and Bounds steps over it.
func (c Calendar) start(y int, m time.Month, d, off int) int64 {
	loc := c.loc()
	if c.Period == Month {
		m, d = m+time.Month(off), 1
	} else {
		d += off
	}
	// The date itself, normalized without a zone (June 31 is July 1).
	wy, wm, wd := time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
	want := civil(wy, wm, wd)
	t := time.Date(wy, wm, wd, 0, 0, 0, 0, loc)
	if civil(t.Date()) == want && civil(t.Add(-time.Microsecond).Date()) < want {
		return t.UnixMicro()
	}
	// Midnight does not exist that day (the clock jumps from 23:59:59 to
	// 01:00), or the whole date does not, and time.Date chose an instant of
	// another date; or midnight is there twice (the clock goes back from
	// 01:00 to 00:00) and time.Date chose the second. The period starts at
	// the first instant of a date on or after it, found by bisection (a
	// zone's jump is at most a day).
	lo, hi := t.Add(-36*time.Hour).UnixMicro(), t.Add(36*time.Hour).UnixMicro()
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if civil(time.UnixMicro(mid).In(loc).Date()) >= want {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// civil orders dates.
func civil(y int, m time.Month, d int) int { return y*10000 + int(m)*100 + d }

// Bounds returns the start of the period that holds now (µs since the
// epoch) and the starts of the periods around it: prev < start <= now <
// next < after. An empty period (a date the zone skips) is none of them.
// A period that began before the epoch starts at 0, where the steps clamp
// the clock (its prev is then -1).
func (c Calendar) Bounds(now int64) (prev, start, next, after int64) {
	t := time.UnixMicro(now).In(c.loc())
	y, m, d := t.Date()
	off := 0
	// A zone that skips midnight may put a period's start an hour from
	// where the date says: step until start <= now < next.
	for i := 0; i < 3; i++ {
		if c.start(y, m, d, off+1) <= now {
			off++
		} else if c.start(y, m, d, off) > now {
			off--
		} else {
			break
		}
	}
	start, next = c.start(y, m, d, off), c.start(y, m, d, off+1)
	prev, after = c.start(y, m, d, off-1), c.start(y, m, d, off+2)
	for k := off - 2; prev >= start && k > off-4; k-- {
		prev = c.start(y, m, d, k)
	}
	for k := off + 3; after <= next && k < off+5; k++ {
		after = c.start(y, m, d, k)
	}
	if start < 0 {
		start = 0
	}
	if prev >= start {
		prev = start - 1
	}
	return prev, start, next, after
}

const calState = 16

// Step admits n if the units admitted in now's period plus n stay within
// Policy.Limit.
func (c Calendar) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	now = min(max(now, 0), bkMaxNow)
	_, start, stop, after := c.Bounds(now)
	used := int64(0)
	if s, u, ok := calDecode(state); ok {
		switch {
		case s == start:
			used = u
		case s == stop:
			// A later period: the clock moved backwards. Stand still in it.
			start, stop, used = s, after, u
		case s > stop && s <= bkMaxNow:
			_, s2, e2, _ := c.Bounds(s)
			if s2 == s {
				start, stop, used = s, e2, u
			}
		}
	}
	ttl := max(stop-now, 1)
	limit := p.Limit
	if n >= 1 && n <= limit && used+n <= limit {
		used += n
		next := calEncode(state, start, used)
		return next, core.Micros(ttl), core.Decision{Allowed: true, Limit: limit, Remaining: limit - used, ResetAfter: core.Micros(ttl)}
	}
	d := core.Decision{Limit: limit, Remaining: max(limit-used, 0)}
	if used > 0 {
		d.ResetAfter = core.Micros(ttl)
	}
	if n >= 1 && n <= limit {
		d.RetryAfter = core.Micros(ttl)
	}
	return nil, 0, d
}

// MultiScript is the multi-limit script.
func (Calendar) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the calendar's arguments: its period boundaries
// around hint, computed in Location.
func (c Calendar) AppendMultiArgs(dst []int64, p *core.Policy, hint, n int64) []int64 {
	prev, start, next, after := c.Bounds(min(max(hint, 0), bkMaxNow))
	return append(dst, multiCalendar, n, p.Limit, p.WindowMicros(), p.Capacity(), p.IntervalMicros(), p.MaxDelayMicros(),
		prev, start, next, after)
}

func calDecode(state []byte) (start, used int64, ok bool) {
	if len(state) != calState {
		return 0, 0, false
	}
	start = int64(binary.BigEndian.Uint64(state))
	used = int64(binary.BigEndian.Uint64(state[8:]))
	return start, used, start >= 0 && start <= bkMaxNow && used >= 0 && used <= core.MaxLimit
}

func calEncode(buf []byte, start, used int64) []byte {
	b := stateBuf(buf, calState)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return binary.BigEndian.AppendUint64(b, uint64(used))
}
