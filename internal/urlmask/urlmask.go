// Package urlmask masks the passwords in a store URL for messages, whether
// or not the URL parses: the password of its user information, and the
// value of every query parameter whose name holds "password" (a Sentinel
// URL carries its primary's there). storeurl's errors and the command's
// messages about a --store value both show URLs through Mask, and clear
// what they quote of a URL of its passwords through Scrub.
package urlmask

import (
	"net/url"
	"slices"
	"strings"
)

// Mask returns raw with each password replaced by xxxxx. Where raw's user
// information ends is read as its writer means it (see Userinfo), not only
// as url.Parse reads it, so a password holding a '#', '/' or '?' that is
// not %-escaped is masked whole. In doubt it masks more.
//
// A URL without "://" (a scheme left out or mistyped: "u:pw@host",
// "redis:/u:pw@host") is not one, but what comes before its last '@' that
// a host follows may still be a password: Mask masks it from its first ':'.
// A URL with no '@' whose first host's port is no number and holds a host
// ("redis://u:pw.127.0.0.1:6379": the '@' left out) is masked from that
// ':' to the end of its hosts.
//
// The last '@' outside a query's value ends the user information when it
// lies further than that (a user with an '@', an email, and a host that
// does not parse). Last, every piece of a password (Secrets) still in the
// result is masked too.
func Mask(raw string) string {
	out := raw
	if i, j, ok := maskBounds(raw, false); ok {
		if c := strings.IndexByte(raw[i:j], ':'); c >= 0 {
			out = raw[:i+c] + ":xxxxx" + raw[j:]
		}
	}
	return Scrub(maskQuery(out), raw)
}

// Bounds returns the bounds of the user information Mask masks the
// password of (see Mask).
func Bounds(raw string) (i, j int, ok bool) { return bounds(raw, false) }

// bounds is Userinfo's bounds (from the start of raw without "://"), or
// those to raw's last '@' outside a query's value, when that is further;
// in a URL that does not parse, or parses with no host, to its last '@'
// wherever it is.
func bounds(raw string, values bool) (i, j int, ok bool) {
	start := 0
	if s := strings.Index(raw, "://"); s >= 0 {
		start = s + len("://")
	}
	i, j, ok = userinfoFrom(raw, start, values)
	anywhere := broken(raw)
	for k := len(raw); ; {
		k = strings.LastIndexByte(raw[start:k], '@')
		if k < 0 {
			return i, j, ok
		}
		if k += start; anywhere || !inQueryValue(raw, start, k) {
			if !ok || k > j {
				return start, k, true
			}
			return i, j, ok
		}
	}
}

// maskBounds is bounds, or, in a URL with no '@' at all, those of a user
// information whose '@' was left out (missingAt).
func maskBounds(raw string, values bool) (i, j int, ok bool) {
	if i, j, ok = bounds(raw, values); ok {
		return i, j, ok
	}
	return missingAt(raw)
}

// missingAt returns the bounds of the authority of raw (to its first '/'
// or '?') when it has no '@' and what follows its first ':' is no port,
// nor what may be the rest of an IPv6 address left out of brackets, and
// holds a '.', ':' or '#', as a host after a password does: the '@' of
// "user:password@host" left out ("redis://u:pw.127.0.0.1:6379"), and all
// of the authority after the ':' may be the password's. A bad port with
// none of them ("127.0.0.1:http") is left as it is.
func missingAt(raw string) (i, j int, ok bool) {
	s := strings.Index(raw, "://")
	if s < 0 {
		return 0, 0, false
	}
	i, j = s+len("://"), len(raw)
	if k := strings.IndexAny(raw[i:], "/?"); k >= 0 {
		j = i + k
	}
	auth := raw[i:j]
	if strings.HasPrefix(auth, "[") || strings.Contains(auth, "@") {
		return 0, 0, false
	}
	first, _, _ := strings.Cut(auth, ",")
	_, port, found := strings.Cut(first, ":")
	if !found || strings.Trim(port, "0123456789abcdefABCDEF:") == "" || !strings.ContainsAny(port, ".:#") {
		return 0, 0, false
	}
	return i, j, true
}

// broken reports whether raw does not parse as a URL (a host list read as
// storeurl reads it), or parses with no host.
func broken(raw string) bool {
	parsed, list := HostList(raw)
	u, err := url.Parse(parsed)
	return err != nil || list == "" && u.Host == ""
}

// Secrets returns what raw's passwords are, for a message that may quote
// part of raw to be cleared of them: the password of its user information
// (as Bounds, but leaving an '@' in a query's value to the value), each
// query password's value (see maskQuery), each as written and %-decoded,
// and each piece of them, cut at the characters a URL separates its parts
// with, of at least 4 bytes (a shorter piece would clear words of the
// message too).
func Secrets(raw string) []string {
	var whole []string
	// rest is raw without them: a piece also found in it (a port, a
	// host's name) is not the password's alone, and clearing it would
	// clear the message's.
	rest := []byte(raw)
	blank := func(from, to int) {
		whole = append(whole, raw[from:to])
		for k := from; k < to; k++ {
			rest[k] = ' '
		}
	}
	if i, j, ok := maskBounds(raw, true); ok {
		if c := strings.IndexByte(raw[i:j], ':'); c >= 0 {
			blank(i+c+1, j)
		}
	}
	if q := strings.IndexByte(raw, '?'); q >= 0 {
		for _, p := range queryParams(raw[q+1:]) {
			if p.password {
				blank(q+1+p.at, q+1+p.at+len(p.value))
			}
		}
	}
	for _, w := range whole {
		for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
			if d, err := unescape(w); err == nil && d != w {
				whole = append(whole, d)
			}
		}
	}
	var out []string
	add := func(p string) {
		if len(p) >= 4 && !strings.Contains(string(rest), p) {
			out = append(out, p)
		}
	}
	for _, w := range whole {
		if len(w) >= 4 {
			out = append(out, w)
		}
		// Each piece between separators, and each run from a separator to
		// either end: a message may quote a password from any of them on
		// (a reader that took a '@' in it for the user information's end
		// shows what follows as a host).
		for k := 0; k < len(w); k++ {
			if strings.IndexByte(urlSeparators, w[k]) >= 0 {
				add(w[:k])
				add(w[k+1:])
			}
		}
		for _, p := range strings.FieldsFunc(w, func(r rune) bool { return strings.ContainsRune(urlSeparators, r) }) {
			if p != w {
				add(p)
			}
		}
	}
	return out
}

// urlSeparators are the characters a URL, or a reader of one, may cut a
// password at.
const urlSeparators = "&;=?#/@:,[] \t!"

// Scrub returns msg with every secret of raw (Secrets) replaced by xxxxx,
// the longest first.
func Scrub(msg, raw string) string {
	secrets := Secrets(raw)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// Userinfo returns the bounds of raw's user information, raw[i:j], as its
// writer means it: from after "://" to the last '@' that a host follows
// (nothing, or the characters of hosts and ports, up to a '/', '?', '#' or
// the end). url.Parse ends the user information at the first '/', '?' or
// '#', so it reads a password holding one of them, not %-escaped, as part
// of a host, a path, a query or a fragment; Userinfo does not.
//
// An '@' in a query parameter's value may end such a password
// ("redis://u:1?a=b@host") or be the value's own ("?username=me@example.com").
// With values false Userinfo takes it for the end of a password, as Mask
// does; with values true it leaves it to the value.
func Userinfo(raw string, values bool) (i, j int, ok bool) {
	s := strings.Index(raw, "://")
	if s < 0 {
		return 0, 0, false
	}
	return userinfoFrom(raw, s+len("://"), values)
}

// userinfoFrom is Userinfo for user information that starts at raw[i].
// When no '@' is followed by a host name (the host has a character no
// host may: a pasted space), the last '@' outside a query's value ends
// it: url.Parse fails on such a URL, and its password is masked all the
// same.
func userinfoFrom(raw string, i int, values bool) (_, j int, ok bool) {
	last := -1
	for j = len(raw); ; {
		j = strings.LastIndexByte(raw[i:j], '@')
		if j < 0 {
			break
		}
		j += i
		inValue := inQueryValue(raw, i, j)
		if hostFollows(raw[j+1:]) && !(values && inValue) {
			return i, j, true
		}
		if last < 0 && !inValue {
			last = j
		}
	}
	if last < 0 {
		return 0, 0, false
	}
	return i, last, true
}

// hostFollows reports whether s, up to a '/', '?', '#' or its end, could
// be a list of hosts and ports.
func hostFollows(s string) bool {
	for _, c := range []byte(s) {
		switch {
		case c == '/' || c == '?' || c == '#':
			return true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(".-_~:,[]%", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// inQueryValue reports whether raw[at] lies in the value of a query
// parameter, the query starting at the first '?' after raw[start].
func inQueryValue(raw string, start, at int) bool {
	q := strings.IndexByte(raw[start:at], '?')
	if q < 0 {
		return false
	}
	part := raw[start+q+1 : at]
	if k := strings.LastIndexAny(part, "&;"); k >= 0 {
		part = part[k+1:]
	}
	return strings.Contains(part, "=")
}

// maskQuery masks the value of every password parameter in the query of
// s, whether or not the query parses (see queryParams).
func maskQuery(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:q+1])
	for _, p := range queryParams(s[q+1:]) {
		if p.password {
			b.WriteString(p.name + "=xxxxx" + p.sep)
			continue
		}
		b.WriteString(p.text + p.sep)
	}
	return b.String()
}

// queryParam is a parameter of a query as queryParams reads it.
type queryParam struct {
	text     string // as written, without its separator
	name     string
	value    string
	at       int  // where value starts in the query
	password bool // its name holds "password" (or does not unescape)
	sep      string
}

// queryParams cuts query at each '&', ';' and '?' (a second '?' starts
// no query, but a reader may take what follows for one). A password's
// value runs on over the parts after it that follow a '?' or ';' (a
// query parser splits at '&' alone) and those after a '&' that hold no
// '=': a password with a '&' that is not %-escaped reads as a parameter
// with no value after it, which is the rest of the password.
func queryParams(query string) []queryParam {
	var out []queryParam
	for rest := query; rest != ""; {
		at := len(query) - len(rest)
		part, sep := rest, ""
		if k := strings.IndexAny(rest, "&;?"); k >= 0 {
			part, sep, rest = rest[:k], rest[k:k+1], rest[k+1:]
		} else {
			rest = ""
		}
		name, value, hasValue := strings.Cut(part, "=")
		n, err := url.QueryUnescape(name)
		p := queryParam{text: part, name: name, value: value, at: at + len(name) + 1, sep: sep,
			password: hasValue && (err != nil || strings.Contains(strings.ToLower(n), "password"))}
		for p.password && rest != "" {
			next, nsep := rest, ""
			k := strings.IndexAny(rest, "&;?")
			if k >= 0 {
				next, nsep = rest[:k], rest[k:k+1]
			}
			// A parser splits a query at '&' alone (and refuses ';'): what
			// follows a '?' or ';' is the password's, '=' or not.
			if p.sep == "&" && strings.Contains(next, "=") {
				break
			}
			p.value += p.sep + next
			p.text += p.sep + next
			p.sep = nsep
			if k >= 0 {
				rest = rest[k+1:]
			} else {
				rest = ""
			}
		}
		out = append(out, p)
	}
	return out
}

// HostList takes out of rawURL a list of hosts ("h1:7000,h2:7001"),
// which url.Parse reads as one host and refuses when it holds an IPv6
// literal ("[::1]:7000,[::1]:7001") or when a host but the first has no
// port ("h1:7000,h2": the port would be "7000,h2"), and returns rawURL
// with one placeholder host in its place, and the list, for the caller to
// split and check. Any other rawURL is returned as it is, with no list.
func HostList(rawURL string) (parsed, list string) {
	s := strings.Index(rawURL, "://")
	if s < 0 {
		return rawURL, ""
	}
	i := s + len("://")
	if _, j, ok := Userinfo(rawURL, true); ok {
		i = j + 1
	}
	end := len(rawURL)
	if k := strings.IndexAny(rawURL[i:], "/?#"); k >= 0 {
		end = i + k
	}
	list = rawURL[i:end]
	if !strings.Contains(list, ",") {
		return rawURL, ""
	}
	return rawURL[:i] + "host-list" + rawURL[end:], list
}
