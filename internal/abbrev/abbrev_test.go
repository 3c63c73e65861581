package abbrev

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	if got := Quote("api", 8); got != `"api"` {
		t.Errorf("Quote(api) = %s", got)
	}
	long := strings.Repeat("a", 1<<20)
	if got, want := Quote(long, 4), `"aaaa"… (1048576 bytes)`; got != want {
		t.Errorf("Quote of a megabyte = %s, want %s", got, want)
	}
	// A cut inside a UTF-8 sequence moves back to its start.
	if got := Quote("aé"+long, 2); got != `"a"… (1048579 bytes)` || !utf8.ValidString(got) {
		t.Errorf("Quote cut inside é: %s", got)
	}
	if got := Cut("aé"+long, 2); got != "a…" {
		t.Errorf("Cut inside é: %s", got)
	}
	if got := Cut("short", 8); got != "short" {
		t.Errorf("Cut of a short string: %s", got)
	}
}
