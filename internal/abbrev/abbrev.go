// Package abbrev shortens a value an error message quotes: an identity, a
// policy name or a URL may be as long as its caller made it, and a message
// that repeats a megabyte of it drowns the reason in the log.
package abbrev

import "strconv"

// Quote is strconv.Quote(s) for s up to max bytes; a longer s is quoted
// to its first max bytes (never splitting a UTF-8 sequence), followed by
// "…" and its length: "aaaa"… (1048576 bytes).
func Quote(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(head(s, max)) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// Cut is s up to max bytes; a longer s is cut to its first max bytes
// (never splitting a UTF-8 sequence), followed by "…".
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return head(s, max) + "…"
}

// head is s's first max bytes or fewer: a cut inside a UTF-8 sequence
// moves back to the sequence's start.
func head(s string, max int) string {
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
