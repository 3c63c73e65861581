package core

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	ok := Policy{Name: "api", Limit: 25, Window: 2 * time.Second}
	tests := []struct {
		name  string
		mod   func(p *Policy)
		field string // "" means valid
	}{
		{"valid", func(p *Policy) {}, ""},
		{"valid burst", func(p *Policy) { p.Burst = 100 }, ""},
		{"valid name chars", func(p *Policy) { p.Name = "A-z_0.9" }, ""},
		{"empty name", func(p *Policy) { p.Name = "" }, "Name"},
		{"long name", func(p *Policy) { p.Name = strings.Repeat("a", MaxNameLen+1) }, "Name"},
		{"separator in name", func(p *Policy) { p.Name = "a:b" }, "Name"},
		{"brace in name", func(p *Policy) { p.Name = "a{b}" }, "Name"},
		{"space in name", func(p *Policy) { p.Name = "a b" }, "Name"},
		{"zero limit", func(p *Policy) { p.Limit = 0 }, "Limit"},
		{"negative limit", func(p *Policy) { p.Limit = -1 }, "Limit"},
		{"huge limit", func(p *Policy) { p.Limit = MaxLimit + 1 }, "Limit"},
		{"limit above one per µs", func(p *Policy) { p.Limit = 2001; p.Window = 2 * time.Millisecond }, "Limit"},
		{"window too short", func(p *Policy) { p.Window = time.Millisecond - 1 }, "Window"},
		{"window zero", func(p *Policy) { p.Window = 0 }, "Window"},
		{"window too long", func(p *Policy) { p.Window = MaxWindow + time.Second }, "Window"},
		{"window 30 days", func(p *Policy) { p.Window = MaxWindow }, ""},
		{"negative burst", func(p *Policy) { p.Burst = -1 }, "Burst"},
		{"huge burst", func(p *Policy) { p.Burst = MaxLimit + 1 }, "Burst"},
		{"burst beyond horizon", func(p *Policy) { p.Limit = 1; p.Window = MaxWindow; p.Burst = 100 }, "Burst"},
		{"burst × interval overflows int64", func(p *Policy) { p.Limit = 1; p.Window = MaxWindow; p.Burst = MaxLimit }, "Burst"},
		{"burst × interval overflows, shorter window", func(p *Policy) { p.Limit = 1; p.Window = 480 * time.Hour; p.Burst = 7_000_000 }, "Burst"},
		{"negative max delay", func(p *Policy) { p.MaxDelay = -1 }, "MaxDelay"},
		{"max delay too long", func(p *Policy) { p.MaxDelay = MaxWindow + 1 }, "MaxDelay"},
		{"negative lease ttl", func(p *Policy) { p.LeaseTTL = -time.Second }, "LeaseTTL"},
		{"lease ttl too short", func(p *Policy) { p.LeaseTTL = time.Microsecond }, "LeaseTTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			tt.mod(&p)
			err := p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("Validate() = %v, want a *PolicyError", err)
			}
			if pe.Field != tt.field {
				t.Fatalf("field = %q, want %q (%v)", pe.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name the field %q", err, tt.field)
			}
		})
	}
}

// A Policy that Validate refuses still answers its derived values without
// panicking: a Limit below 1 has no interval, which NewScriptArgs then
// passes on as 0 (and a store refuses: store.Script.CheckArgs).
func TestDerivedOfAnInvalidPolicy(t *testing.T) {
	for _, p := range []Policy{{}, {Limit: -5, Window: time.Second}} {
		if got := p.IntervalMicros(); got != 0 {
			t.Errorf("%v: IntervalMicros = %d, want 0", p, got)
		}
		if a := NewScriptArgs(&p, 0, 1); a.Interval != 0 {
			t.Errorf("%v: NewScriptArgs gives Interval %d, want 0", p, a.Interval)
		}
	}
}

func TestPolicyDerived(t *testing.T) {
	p := Policy{Name: "x", Limit: 3, Window: time.Second}
	if got, want := p.IntervalMicros(), int64(333334); got != want {
		t.Errorf("IntervalMicros = %d, want %d (rounded up, never faster than the rate)", got, want)
	}
	if got := p.Capacity(); got != 3 {
		t.Errorf("Capacity = %d, want Limit 3 when Burst is 0", got)
	}
	p.Burst = 7
	if got := p.Capacity(); got != 7 {
		t.Errorf("Capacity = %d, want Burst 7", got)
	}
	if got, want := p.MaxDelayMicros(), int64(1e6); got != want {
		t.Errorf("MaxDelayMicros default = %d, want Window %d", got, want)
	}
	if got, want := p.LeaseTTLMicros(), int64(1e6); got != want {
		t.Errorf("LeaseTTLMicros default = %d, want Window %d", got, want)
	}
	if got, want := PerSecond("api", 10).String(), "api: 10 per 1s (burst 10)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// The largest products the algorithms form stay exact in float64 (Lua).
func TestPolicyBoundsKeepLuaExact(t *testing.T) {
	const exact = int64(1) << 53
	horizon := int64(MaxHorizon / time.Microsecond)
	now := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	if now+2*horizon+2*int64(MaxWindow/time.Microsecond) >= exact {
		t.Fatalf("a time two horizons ahead in 2200 is not exact in float64")
	}
}

// A policy name far past the longest allowed is not repeated whole in the
// error: a megabyte of it would drown the reason.
func TestLongNameErrorIsShort(t *testing.T) {
	p := Policy{Name: strings.Repeat("a", 1<<20), Limit: 1, Window: time.Second}
	err := p.Validate()
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "1048576 bytes") {
		t.Errorf("Validate of a 1 MiB name: a %d-byte error, want a short one giving the length", len(err.Error()))
	}
}

// The error for a name with a byte outside the set shows that byte, not the
// rune it would start: "é" is 0xC3 0xA9, and byte 0 is "\xc3".
func TestPolicyNameErrorShowsTheByte(t *testing.T) {
	p := Policy{Name: "é", Limit: 1, Window: time.Second}
	err := p.Validate()
	if err == nil || !strings.Contains(err.Error(), `byte 0 is "\xc3"`) {
		t.Fatalf("Validate: %v; want it to name byte 0 as \"\\xc3\"", err)
	}
	_, err = NewMulti(MultiConfig{Name: "é", Store: newMapStore()})
	if err == nil || !strings.Contains(err.Error(), `byte 0 is "\xc3"`) {
		t.Fatalf("NewMulti: %v; want it to name byte 0 as \"\\xc3\"", err)
	}
}
