package urlmask

import "testing"

func TestMask(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://admin@127.0.0.1:6379", "redis://admin@127.0.0.1:6379"},
		{"redis://admin:pw@127.0.0.1:6379/0?pool_size=2", "redis://admin:xxxxx@127.0.0.1:6379/0?pool_size=2"},
		{"redis://:pw@127.0.0.1", "redis://:xxxxx@127.0.0.1"},
		{"redis://u:p@ss@127.0.0.1:6379", "redis://u:xxxxx@127.0.0.1:6379"},
		// A '#', '/' or '?' that url.Parse would end the password at.
		{"redis://:pw#x@127.0.0.1:16610", "redis://:xxxxx@127.0.0.1:16610"},
		{"redis://u:6379/pw@127.0.0.1:6379/2", "redis://u:xxxxx@127.0.0.1:6379/2"},
		{"redis://u:a?b@h1:1,h2:2?pool_size=1", "redis://u:xxxxx@h1:1,h2:2?pool_size=1"},
		{"redis://u:a#b@[::1]:6379", "redis://u:xxxxx@[::1]:6379"},
		{"memory://u:a/b@", "memory://u:xxxxx@"},
		// An '@' in a value, not followed by a host, ends no password.
		{"redis+sentinel://h:26379/m?username=me@x.com&password=pw", "redis+sentinel://h:26379/m?username=me@x.com&password=xxxxx"},
		// In doubt, more is masked.
		{"redis+sentinel://h:26379/m?username=me@x.com", "redis+sentinel://h:xxxxx@x.com"},
		// Query passwords, whether or not the query parses.
		{"redis://h?password=pw;x=%zz", "redis://h?password=xxxxx"}, // a parser refuses ';': the rest may be the password's
		{"redis://h?pass%zzword=pw&x=1", "redis://h?pass%zzword=xxxxx&x=1"},
		// No "://": a scheme left out or mistyped still hides a password.
		{"no scheme:pw@host", "no scheme:xxxxx@host"},
		{"default:SECRETPW@127.0.0.1:6379", "default:xxxxx@127.0.0.1:6379"},
		{"//default:SECRETPW@127.0.0.1:6379/0", "//default:xxxxx@127.0.0.1:6379/0"},
		{":SECRETPW@127.0.0.1:6379", ":xxxxx@127.0.0.1:6379"},
		{"redis:/default:SECRETPW@127.0.0.1:6379", "redis:xxxxx@127.0.0.1:6379"},
		{"redis:default:SECRETPW@127.0.0.1:6379", "redis:xxxxx@127.0.0.1:6379"},
		{"redis//default:SECRETPW@127.0.0.1:6379", "redis//default:xxxxx@127.0.0.1:6379"},
		{"memory", "memory"},
		// No '@' followed by a host name: the last '@' of the authority
		// ends the password.
		{"redis://u:pw@ 127.0.0.1:6379", "redis://u:xxxxx@ 127.0.0.1:6379"},
		{"redis+cluster://:pw@a b:1,c:2", "redis+cluster://:xxxxx@a b:1,c:2"},
		// A URL that does not parse, or has no host: its last '@'.
		{"redis://u:pw?a=b@ 127.0.0.1:6379", "redis://u:xxxxx@ 127.0.0.1:6379"},
		{"redis://u:p@/pw@ 127.0.0.1:6379", "redis://u:xxxxx@ 127.0.0.1:6379"},
		// A query password with a '&' or ';': the parts after it with no
		// '=' are the rest of it.
		{"redis://h?password=ab;cd&x=1", "redis://h?password=xxxxx&x=1"},
		{"redis://h?password=ab&cd", "redis://h?password=xxxxx"},
		// A user with an '@' (an email): the last '@' outside a query's
		// value ends the password, even in a URL that parses.
		{"redis://me@x.com:2024/pw99@ 127.0.0.1:6379", "redis://me@x.com:xxxxx@ 127.0.0.1:6379"},
		// A second '?' starts no query, but a password after it is masked.
		{"redis://h:1/m?x=1?password=pw", "redis://h:1/m?x=1?password=xxxxx"},
		// No '@' at all, where a host's port is no number: the '@' left
		// out of "user:password@host", and the rest of the authority may
		// be the password's.
		{"redis://user:PASS.127.0.0.1:6379", "redis://user:xxxxx"},
		{"redis://user:PASS#host:6379/0?x=1", "redis://user:xxxxx/0?x=1"},
		{"redis+cluster://u:PASS.h1:1,h2:2", "redis+cluster://u:xxxxx"},
		{"redis://:SECRETPW127.0.0.1:6379", "redis://:xxxxx"},
		// A port, or what may be an IPv6 address left out of its brackets,
		// is no password.
		{"redis://h1:6379,h2:6380", "redis://h1:6379,h2:6380"},
		{"redis://::1:6379", "redis://::1:6379"},
		{"redis://[::1]:6379", "redis://[::1]:6379"},
		{"redis://127.0.0.1:http", "redis://127.0.0.1:http"},
	} {
		if got := Mask(c.raw); got != c.want {
			t.Errorf("Mask(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestUserinfo(t *testing.T) {
	for _, c := range []struct {
		raw    string
		values bool
		want   string // "-" for none
	}{
		{"redis://h:1", false, "-"},
		{"redis://u:p@h:1", false, "u:p"},
		{"redis://u:p@h:1", true, "u:p"},
		{"redis://u:p#q@h:1/0", true, "u:p#q"},
		{"redis://u:1?a=b@h", false, "u:1?a=b"},
		{"redis://u:1?a=b@h", true, "-"},
		{"redis://u:p@h/0?client_name=a@b.c", true, "u:p"},
		{"redis://u:p@h/0?client_name=a@b.c", false, "u:p@h/0?client_name=a"},
		{"redis://u:p@h/0?client_name=a@b&x=1", false, "u:p"},
	} {
		got := "-"
		if i, j, ok := Userinfo(c.raw, c.values); ok {
			got = c.raw[i:j]
		}
		if got != c.want {
			t.Errorf("Userinfo(%q, %v) = %q, want %q", c.raw, c.values, got, c.want)
		}
	}
}

// Scrub clears a message of the passwords of a URL and of their pieces,
// which a message may quote apart (a path, a parameter's name).
func TestScrub(t *testing.T) {
	for _, c := range []struct{ msg, raw, want string }{
		{`invalid port ":s3cr3t" after host`, "redis://u:s3cr3t?a=b@ 127.0.0.1:6379", `invalid port ":xxxxx" after host`},
		{"parameter s3cr3t has no value", "redis://h?password=ab&s3cr3t", "parameter xxxxx has no value"},
		{`memory takes no path, got "/u:s3cr3t@h"`, "memory:/u:s3cr3t@h", `memory takes no path, got "xxxxx@h"`},
		{`bad host "user:PASS.127.0.0.1:6379": an IPv6 address goes in brackets`, "redis://user:PASS.127.0.0.1:6379", `bad host "user:xxxxx": an IPv6 address goes in brackets`},
		{`not a URL: invalid port ":SECRET" after host`, "redis://user:SECRET#myhost:6379", `not a URL: invalid port ":xxxxx" after host`},
		// Pieces under 4 bytes are left: they would clear the message.
		{"no host", "redis://u:no@", "no host"},
	} {
		if got := Scrub(c.msg, c.raw); got != c.want {
			t.Errorf("Scrub(%q, %q) = %q, want %q", c.msg, c.raw, got, c.want)
		}
	}
}
