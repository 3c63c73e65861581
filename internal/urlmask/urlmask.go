// Package urlmask masks the passwords in a store URL for messages, whether
// or not the URL parses: the password of its user information, and the
// value of every query parameter whose name holds "password" (a Sentinel
// URL carries its primary's there). storeurl's errors and the command's
// messages about a --store value both show URLs through Mask.
package urlmask

import (
	"net/url"
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
func Mask(raw string) string {
	i, j, ok := Userinfo(raw, false)
	if !ok && !strings.Contains(raw, "://") {
		i, j, ok = userinfoFrom(raw, 0, false)
	}
	if ok {
		if c := strings.IndexByte(raw[i:j], ':'); c >= 0 {
			raw = raw[:i+c] + ":xxxxx" + raw[j:]
		}
	}
	return maskQuery(raw)
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
// s, whether or not the query parses.
func maskQuery(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:q+1])
	rest := s[q+1:]
	for rest != "" {
		part := rest
		sep := strings.IndexAny(rest, "&;")
		if sep >= 0 {
			part, rest = rest[:sep+1], rest[sep+1:]
		} else {
			rest = ""
		}
		name, _, hasValue := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); hasValue && (err != nil || strings.Contains(strings.ToLower(n), "password")) {
			b.WriteString(name + "=xxxxx")
			if sep >= 0 {
				b.WriteByte(part[len(part)-1])
			}
			continue
		}
		b.WriteString(part)
	}
	return b.String()
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
