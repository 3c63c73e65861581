package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	sredis "github.com/sluicehq/sluice/store/redis"
	"github.com/sluicehq/sluice/storeurl"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	cases := []struct{ url, want string }{
		{"", "no scheme"},
		{"127.0.0.1:6379", "no scheme: want <scheme>://host:port"},
		{"ftp://127.0.0.1:21", `unknown scheme "ftp"; known: memory, redis`},
		{"redis:127.0.0.1", "want redis://host"},
		{"redis://", "no host"},
		{"redis://127.0.0.1:99999", `bad port "99999"`},
		{"redis://127.0.0.1:http", `invalid port ":http"`},
		{"redis://127.0.0.1:0", `bad port "0"`},
		{"redis://127.0.0.1:6379,127.0.0.1:6380", "for a cluster use redis+cluster://"},
		{"redis://127.0.0.1:6379?pool_size=abc", "pool_size"},
		{"redis://127.0.0.1:6379?frobnicate=1", "frobnicate"},
		{"redis://127.0.0.1:6379/x", "database number"},
		{"redis://127.0.0.1:6379?clock_skew=soon", `clock_skew="soon" is not a duration`},
		{"redis://127.0.0.1:6379?pipelines=0", "pipelines"},
		{"redis://127.0.0.1:6379?no_batch=perhaps", "no_batch"},
		{"redis://127.0.0.1:6379?max_attempts=1&max_attempts=2", "given 2 times"},
		{"redis://127.0.0.1:6379#top", "fragment"},
		{"redis+cluster://127.0.0.1:7000/3", "no database number"},
		{"redis+cluster://127.0.0.1:7000?nope=1", "nope"},
		{"redis+sentinel://127.0.0.1:26379", "<master name>"},
		{"redis+sentinel://127.0.0.1:26379/a/b/c", "<master name>"},
		{"redis+sentinel://127.0.0.1:26379/m?master_name=n", "path, not a master_name"},
		{"valkey://127.0.0.1:6379?frob=1", "unknown parameter frob"},
		{"valkey://127.0.0.1:6379?dial_timeout=x", "dial_timeout"},
		{"memcache://127.0.0.1:11211?timeout=fast", "timeout"},
		{"memcache://127.0.0.1:11211?max_idle_conns=-1", "max_idle_conns"},
		{"memcache://127.0.0.1:11211/x", "takes no path"},
		{"memcache://u:p@127.0.0.1:11211", "no user or password"},
		{"memcache://127.0.0.1:11211,,127.0.0.1:11212", "empty host"},
		{"memory://127.0.0.1", "takes no host"},
		{"memory://?max_keys=0", "max_keys"},
		{"memory://?sweep=1m", "unknown parameter sweep"},
		{"redis://%zz", "not a URL"},
		{"redis://127.0.0.1:6379?pool_size=-1", "pool_size"},
		{"redis://127.0.0.1:6379?dial_timeout=-1s", "dial_timeout"},
		{"redis://127.0.0.1:6379/-1", "must not be negative"},
		{"redis+cluster://127.0.0.1:7000?max_active_conns=-3", "max_active_conns"},
		{"redis+sentinel://127.0.0.1:26379/m/-3", "must not be negative"},
		{"memcache://127.0.0.1:11211?timeout=-1s", "timeout"},
		{"memory://?max_keys=%zz", "malformed query"},
		{"redis://127.0.0.1:6379?pool_size=5;pool_timeout=1s", "malformed query"},
		{"memcache://127.0.0.1:11211?timeout=1s&max_idle_conns=%4", "malformed query"},
		// A password with a '#', '/' or '?' that is not %-escaped: url.Parse
		// ends the user information there, so the host it reads is not the
		// one written, whether or not it then fails.
		{"redis://:pw#x@127.0.0.1:6379", "a '#', '/' or '?' in a user or password must be %-escaped (%23, %2F, %3F)"},
		{"redis://u:pw/x@127.0.0.1:6379", "must be %-escaped"},
		{"redis://u:6379/x@127.0.0.1:6379", "must be %-escaped"},
		{"redis://u:6379?x@127.0.0.1:6379", "must be %-escaped"},
		{"redis+sentinel://u:1#x@127.0.0.1:26379/m", "must be %-escaped"},
		{"valkey://u:1/x@127.0.0.1:6379", "must be %-escaped"},
		// Counts and sizes past their maxima: go-redis makes its pool at
		// once, about half a KiB for each of pool_size (and of
		// pipeline_pool_size), so a typo must not reach it.
		{"redis://127.0.0.1:6379?pool_size=100000000", `parameter pool_size="100000000" is not a whole number from 0 to 10000`},
		{"redis://127.0.0.1:6379?pool_size=10001", "pool_size"},
		{"redis+cluster://127.0.0.1:7000?pool_size=100000000", "from 0 to 10000"},
		{"redis+sentinel://127.0.0.1:26379/m?pool_size=100000000", "from 0 to 10000"},
		{"redis://127.0.0.1:6379?min_idle_conns=10001", "min_idle_conns"},
		{"redis://127.0.0.1:6379?max_idle_conns=10001", "max_idle_conns"},
		{"redis://127.0.0.1:6379?max_active_conns=10001", "max_active_conns"},
		{"redis://127.0.0.1:6379?max_concurrent_dials=10001", "max_concurrent_dials"},
		{"redis://127.0.0.1:6379?pipeline_pool_size=100000000", `pipeline_pool_size="100000000" is not a whole number from -1 to 10000`},
		{"redis+cluster://127.0.0.1:7000?pipeline_pool_size=-2", "from -1 to 10000"},
		{"redis://127.0.0.1:6379?pipeline_read_buffer_size=1073741824", `pipeline_read_buffer_size="1073741824" is not a whole number from 0 to 16777216`},
		{"redis+sentinel://127.0.0.1:26379/m?pipeline_write_buffer_size=-1", "pipeline_write_buffer_size"},
		{"redis://127.0.0.1:6379?pipelines=10001", `parameter pipelines="10001" is not a whole number from 1 to 10000`},
		{"redis+cluster://127.0.0.1:7000?max_batch=10001", "max_batch"},
		{"memcache://127.0.0.1:11211?max_idle_conns=10001", `parameter max_idle_conns="10001" is not a whole number from 1 to 10000`},
		{"memory://?shards=65537", `parameter shards="65537" is not a whole number from 1 to 65536`},
		// Malformed values the client libraries take, and duplicates, which
		// they settle by keeping one: refused before any network call
		// (valkey's port 1 would otherwise be an ErrUnavailable).
		{"valkeys://127.0.0.1:1?skip_verify=maybe", `parameter skip_verify="maybe" is not true or false`},
		{"valkeys://127.0.0.1:1?skip_verify=", "parameter skip_verify has no value"},
		{"valkey://127.0.0.1:1?skip_verify=maybe", "skip_verify is for valkeys:// (TLS) only"},
		{"valkey://127.0.0.1:1?protocol=9", `parameter protocol="9" is not 2 or 3`},
		{"redis://127.0.0.1:6379?protocol=9", `parameter protocol="9" is not 2 or 3`},
		{"redis+cluster://127.0.0.1:7000?protocol=1", "is not 2 or 3"},
		{"redis+sentinel://127.0.0.1:26379/m?protocol=4", "is not 2 or 3"},
		// A client name Redis refuses (CLIENT SETNAME takes '!' to '~'):
		// every connection's handshake would fail.
		{"redis://127.0.0.1:6379?client_name=a%20b", `parameter client_name="a b" may hold only the characters ! to ~ (no space or control character)`},
		{"redis+cluster://127.0.0.1:7000?client_name=a%0Ab", "client_name"},
		{"redis+sentinel://127.0.0.1:26379/m?client_name=%00", "client_name"},
		{"valkey://127.0.0.1:1?client_name=a%20b", "client_name"},
		{"valkey://127.0.0.1:1?db=1&db=2", "parameter db is given 2 times"},
		{"redis://127.0.0.1:6379?pool_size=1&pool_size=2", "parameter pool_size is given 2 times"},
		{"redis+cluster://127.0.0.1:7000?read_timeout=1s&read_timeout=2s&read_timeout=3s", "parameter read_timeout is given 3 times"},
		{"redis+sentinel://127.0.0.1:26379/m?password=a&password=b", "parameter password is given 2 times"},
		{"memory://?max_keys=1&max_keys=2", "given 2 times"},
		{"redis://127.0.0.1:6379/99999999999999", `database number "99999999999999" is past 2147483647`},
		{"redis://127.0.0.1:6379/99999999999999999999", "is past 2147483647"},
		{"redis://127.0.0.1:6379?db=2147483648", "is past 2147483647"},
		{"redis://127.0.0.1:6379?db=-1", "must not be negative"},
		{"redis://127.0.0.1:6379/1?db=2", "the database number is given twice: as the path and as db"},
		{"redis+sentinel://127.0.0.1:26379/m/99999999999", "is past 2147483647"},
		{"valkey://127.0.0.1:1/-1", `database number "-1" must not be negative`},
		{"valkey://127.0.0.1:1/99999999999", "is past 2147483647"},
		{"valkey://127.0.0.1:1?db=-1", "must not be negative"},
		{"valkey://127.0.0.1:1/1?db=1", "given twice"},
		{"valkey://127.0.0.1:1?dial_timeout=-1s", `parameter dial_timeout="-1s" must not be negative`},
		// go-redis reads 0 (and a bare number, as seconds, below it) as
		// no timeout, and then fails every dial at once.
		{"redis://127.0.0.1:6379?dial_timeout=0", `parameter dial_timeout="0" is not positive`},
		{"redis://127.0.0.1:6379?dial_timeout=0s", "is not positive"},
		{"redis+cluster://127.0.0.1:7000?dial_timeout=-5", "is not positive"},
		// What url.Parse quotes from the host, not the password, is kept.
		{"redis://u:pw@127.0.0.1:http", `invalid port ":http" after host`},
		// A parameter with no value: go-redis reads most as unset, so the
		// setting the deployment believes it made would not be.
		{"redis://127.0.0.1:6379?pool_size=", "parameter pool_size has no value"},
		{"redis://127.0.0.1:6379?protocol=", "has no value"},
		{"redis+cluster://127.0.0.1:7000?read_timeout=", "has no value"},
		{"redis+sentinel://127.0.0.1:26379/m?db=", "has no value"},
		{"valkey://127.0.0.1:1?client_name=", "has no value"},
		{"memcache://127.0.0.1:11211?timeout", "has no value"},
		// Options the store turns off (it reads and writes the primaries,
		// and follows redirects itself): set, they would not hold.
		{"redis+cluster://127.0.0.1:7000?read_only=true", "parameter read_only=\"true\": the store turns it off"},
		{"redis+cluster://127.0.0.1:7000?route_by_latency=true", "the store turns it off"},
		{"redis+cluster://127.0.0.1:7000?route_randomly=1", "the store turns it off"},
		{"redis+cluster://127.0.0.1:7000?max_redirects=5", "the store turns it off"},
		// go-redis's retries are off in the store, whatever the URL says.
		{"redis://127.0.0.1:6379?max_retries=5", "parameter max_retries=\"5\": the store turns go-redis's retries off"},
		{"redis://127.0.0.1:6379?max_retries=0", "parameter max_retries=\"0\": the store turns go-redis's retries off"},
		{"redis+cluster://127.0.0.1:7000?max_retry_backoff=1h", "parameter max_retry_backoff=\"1h\": the store turns go-redis's retries off"},
		{"redis+sentinel://127.0.0.1:26379/m?min_retry_backoff=8ms", "parameter min_retry_backoff=\"8ms\": the store turns go-redis's retries off"},
		// valkey-go reads a write_timeout of 0 as its own default (10s),
		// and a negative one as none.
		{"valkey://127.0.0.1:1?write_timeout=-1s", `parameter write_timeout="-1s" must be positive`},
		{"valkey://127.0.0.1:1?write_timeout=0s", `parameter write_timeout="0s" must be positive`},
		{"redis+sentinel://127.0.0.1:26379/m?replica_only=true", "the store turns it off"},
		{"redis+sentinel://127.0.0.1:26379/m?route_randomly=true", "the store turns it off"},
		{"redis+cluster://127.0.0.1:7000?skip_verify=true", "parameter skip_verify is for rediss+cluster:// (TLS) only"},
		{"rediss+cluster://127.0.0.1:7000?skip_verify=maybe", `skip_verify="maybe" is not true or false`},
		{"redis+cluster://127.0.0.1:7000?read_only=yes", `parameter read_only="yes" is not true or false`},
		// An IPv6 literal whose ']' is missing would take the default port.
		{"redis+cluster://[::1]:7000,[::1:7001", "no closing ]"},
		{"memcache://[::1:7000,[::1]:7001", "no closing ]"},
		// A zone's '%' is "%25" in a URL, in a list as for one host.
		{"memcache://[fe80::1%lo]:1,127.0.0.1:2", `bad host "[fe80::1%lo]:1": invalid URL escape "%lo"`},
		{"redis+cluster://127.0.0.1:1,[fe80::1%lo]:2", `bad host "[fe80::1%lo]:2": invalid URL escape "%lo"`},
		// A list that holds an IPv6 literal, which url.Parse does not read.
		{"memcache://[::zz]:1,127.0.0.1:2", `bad IPv6 address "::zz"`},
		{"memcache://a b:1,[::1]:2", `bad host "a b"`},
		{"memcache://[::1]:1,,[::1]:2", "empty host"},
		{"memcache://[::1]:99999,[::1]:2", `bad port "99999"`},
		{"redis://[::1]:6379,[::1]:6380", "for a cluster use redis+cluster://"},
		// An IPv6 address outside brackets: memcache opened it as
		// "[::1:16701]:11211", whose Ping answered nil with no server.
		{"memcache://::1:16701", "an IPv6 address goes in brackets"},
		{"memcache://127.0.0.1:1,::1", "an IPv6 address goes in brackets"},
		{"valkey://::1:6379", "an IPv6 address goes in brackets"},
	}
	for _, c := range cases {
		b, err := storeurl.Open(c.url)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded, want an error containing %q", c.url, c.want)
			continue
		}
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Open(%q): %v, which does not match ErrBadURL", c.url, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q): %q, want it to contain %q", c.url, err, c.want)
		}
	}
}

type urlName struct{ url, name string }

// opensAs checks that each URL opens, as the Backend named so.
func opensAs(t *testing.T, cases []urlName) {
	t.Helper()
	for _, c := range cases {
		b, err := storeurl.Open(c.url)
		if err != nil {
			t.Errorf("Open(%q): %v", c.url, err)
			continue
		}
		if b.Name != c.name {
			t.Errorf("Open(%q): Name %q, want %q", c.url, b.Name, c.name)
		}
		b.Close()
	}
}

// A list of hosts may hold IPv6 literals, as a single host may.
func TestHostListsTakeIPv6(t *testing.T) {
	opensAs(t, []urlName{
		{"memcache://127.0.0.1:1,[::1]:2", "memcached 127.0.0.1:1,[::1]:2"},
		{"memcache://[::1]:1,127.0.0.1:2?timeout=1s", "memcached [::1]:1,127.0.0.1:2"},
		{"memcache://[::1],[::1]:2", "memcached [::1]:11211,[::1]:2"},
	})
}

// A port may be left out of any host of a list, the last one too.
func TestHostListsTakeDefaultPorts(t *testing.T) {
	opensAs(t, []urlName{
		{"memcache://127.0.0.1:1,localhost", "memcached 127.0.0.1:1,localhost:11211"},
		{"redis+cluster://127.0.0.1:7000,localhost", "redis cluster 127.0.0.1:7000,localhost:6379"},
		{"redis+cluster://localhost,127.0.0.1:7000", "redis cluster localhost:6379,127.0.0.1:7000"},
	})
}

func TestErrorsHideThePassword(t *testing.T) {
	for _, u := range []string{
		"redis://admin:s3cr3t@127.0.0.1:6379?nope=1",
		"redis+sentinel://admin:s3cr3t@127.0.0.1:26379",
		"memcache://admin:s3cr3t@127.0.0.1:11211",
		"redis://admin:s3cr3t@%zz",
		"redis+sentinel://127.0.0.1:26379/m?password=s3cr3t&nope=1",
		"redis+sentinel://127.0.0.1:26379/m?username=u&password=s3cr3t;nope=1",
		"redis://127.0.0.1:6379?password=s3cr3t&pool_size=x",
		"valkey://127.0.0.1:6379?password=s3cr3t",
		"redis://%zz?password=s3cr3t",
		"redis://127.0.0.1:6379?pass%77ord=s3cr3t&nope=1",
		"redis://127.0.0.1:6379?pass%zzword=s3cr3t&nope=1",
		// A '#', '/' or '?' in a password, not %-escaped: url.Parse fails on
		// some and quotes the password in its reason, and reads others as a
		// host, a path, a query or a fragment.
		"redis://:s3cr3t#pw@127.0.0.1:16610",
		"redis://admin:s3cr3t/pw@127.0.0.1:6379",
		"redis://admin:s3cr3t?pw@127.0.0.1:6379",
		"redis://admin:pw#s3cr3t@127.0.0.1:6379",
		"redis://admin:6379/s3cr3t@127.0.0.1:6379",
		"redis://admin:6379?s3cr3t@127.0.0.1:6379",
		"redis://admin:6379#s3cr3t@127.0.0.1:6379",
		"redis://:6379/s3cr3t@127.0.0.1:6379",
		"redis://admin:p@ss#s3cr3t@127.0.0.1:6379",
		"redis+cluster://admin:7000/s3cr3t@127.0.0.1:7000,127.0.0.1:7001",
		"redis+sentinel://admin:1?s3cr3t@127.0.0.1:26379/m",
		"valkey://admin:6379/s3cr3t@127.0.0.1:6379",
		"memcache://admin:11211/s3cr3t@127.0.0.1:11211",
		"memory://admin:1/s3cr3t@",
		"redis://admin:s3cr3t#pw@127.0.0.1:http",
		"redis://admin:s3cr3t%zz@127.0.0.1:6379",
		// A host url.Parse refuses (a pasted space, a stray character):
		// no '@' is followed by a host name.
		"redis://u:s3cr3t@ 127.0.0.1:6379",
		"redis://u:s3cr3t@127.0.0.1 :6379",
		"redis+sentinel://:s3cr3t@a b:1/m",
		"valkey://:s3cr3t@a b:1",
		"redis+cluster://:s3cr3t@a b:1,c:2",
		"redis://u:s3cr3t@h\x01st:6379",
		"memcache://u:s3cr3t@a b:11211",
		// ... with a '?' (and a '=') in the password, or a second '@'.
		"redis://u:s3cr3t?a=b@ 127.0.0.1:6379",
		"valkey://:s3cr3t?x=1@a b:1",
		"redis+cluster://:s3cr3t?a=b@a b:1,c:2",
		"redis://u:p@/s3cr3t@ 127.0.0.1:6379",
		// A query password holding a separator.
		"redis+sentinel://127.0.0.1:26379/m?password=ab;s3cr3t",
		"redis+sentinel://127.0.0.1:26379/m?password=ab&s3cr3t",
		// A scheme mistyped, its reason quoting the path.
		"memory:/u:s3cr3t@h",
		"redis:/u:pw?s3cr3t@127.0.0.1:6379",
		// No "://": a scheme left out or mistyped.
		"admin:s3cr3t@127.0.0.1:6379",
		"//admin:s3cr3t@127.0.0.1:6379",
		":s3cr3t@127.0.0.1:6379",
		"redis:/admin:s3cr3t@127.0.0.1:6379",
		"redis:admin:s3cr3t@127.0.0.1:6379",
		"redis//admin:s3cr3t@127.0.0.1:6379",
	} {
		_, err := storeurl.Open(u)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%q): %v: want an error without the password", u, err)
		}
	}
}

// A user with an '@' (an email), a query password with an '@', or one
// that a parser %-decodes before quoting: no error shows the password or a
// piece of it.
func TestErrorsHideThePasswordsPieces(t *testing.T) {
	for _, c := range []struct{ url, secret string }{
		{"redis://me@x.com:2024/Secret99@ 127.0.0.1:16905", "Secret99"},
		{"redis://me@x.com:/Hunter2024@127.0.0.1:6379,h b:1", "Hunter2024"},
		{"valkey://me@x.com:Hunter,2024#x@a b:6379", "Hunter"},
		{"redis://[::1/0?password=ab@Hunter2024", "Hunter2024"},
		{"redis+sentinel://[::1]:26379,h b/m?password=ab@Hunter2024", "Hunter2024"},
		{"redis+sentinel://h:26379/m?password=ab@Secret99#x", "Secret99"},
		{"redis:/u:abc?Hunter%212024@h:6379", "Hunter"},
		{"redis+sentinel://h:26379/m?x=1?password=Hunter2024", "Hunter2024"},
		// A '?' or ';' in a query password: a query parser splits at '&'
		// alone (and refuses ';'), so what follows is the password's.
		{"redis+sentinel://h1:26379/m?password=ab?Hunter=2024Secret&db=abc", "Hunter"},
		{"redis+sentinel://h1:26379/m?password=ab;Hunter=2024Secret", "Hunter"},
		// A tail of short pieces after an '@' in a query password.
		{"redis+sentinel://h b:1/m?password=ab@Hu!nt!er!20!24", "er!20!24"},
	} {
		_, err := storeurl.Open(c.url)
		if err == nil || strings.Contains(err.Error(), c.secret) {
			t.Errorf("Open(%q): %v: want an error without %q", c.url, err, c.secret)
		}
	}
}

// Each count and size is taken up to its maximum.
func TestOpenTakesTheMaxima(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:6379?pool_size=10000&min_idle_conns=0&max_idle_conns=10000&max_active_conns=10000&max_concurrent_dials=10000",
		"redis://127.0.0.1:6379?pipeline_pool_size=-1&pipelines=10000&max_batch=10000",
		"redis+cluster://127.0.0.1:7000?pipeline_pool_size=10000&pipeline_read_buffer_size=16777216&pipeline_write_buffer_size=16777216",
		"memcache://127.0.0.1:11211?max_idle_conns=10000",
		"memory://?shards=65536&max_keys=9223372036854775807",
	} {
		b, err := storeurl.Open(u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		b.Close()
	}
}

// What the checks of the parameters leave to the client libraries still
// opens: the values in range, and addr, go-redis's list of more hosts.
func TestOpenTakesWellFormedParameters(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:6379/2147483647?protocol=2&dial_timeout=3",
		"redis://127.0.0.1:6379?db=0&protocol=3&dial_timeout=1s",
		"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002",
		"redis+sentinel://127.0.0.1:26379/m/3?protocol=2",
		"rediss://127.0.0.1:6379?skip_verify=true",
		"rediss+cluster://127.0.0.1:7000?skip_verify=true",
		"redis+cluster://127.0.0.1:7000?read_only=false&max_redirects=-1&max_retries=-1",
	} {
		b, err := storeurl.Open(u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		b.Close()
	}
}

// An '@' that url.Parse reads where it is written, in a password or in a
// parameter's value, is no misplaced end of the user information.
func TestOpenTakesAnAtSignInAPasswordOrAValue(t *testing.T) {
	opensAs(t, []urlName{
		{"redis://admin:p@ss@127.0.0.1:6379/0", "redis 127.0.0.1:6379"},
		{"redis://admin:p%23ss@127.0.0.1:6379", "redis 127.0.0.1:6379"},
		{"redis+sentinel://127.0.0.1:26379/m?username=me@example.com", "redis sentinel 127.0.0.1:26379 master m"},
		{"redis://127.0.0.1:6379?client_name=me@example.com", "redis 127.0.0.1:6379"},
	})
}

// decide checks that limiters over stores b1 and b2 share one fixed window
// of 3 (or, for a store of one process only, that b1 alone keeps it).
func decide(t *testing.T, shared bool, b1, b2 *storeurl.Backend) {
	t.Helper()
	ctx := t.Context()
	p := core.Policy{Name: "storeurl", Limit: 3, Window: time.Hour}
	l1, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: b1.Store, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: b2.Store, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-%d", t.Name(), rand.Int64())
	for i := range 3 {
		l := l1
		if shared && i%2 == 1 {
			l = l2
		}
		if d, err := l.Allow(ctx, id); err != nil || !d.Allowed {
			t.Fatalf("call %d: %+v, %v; want admitted", i+1, d, err)
		}
	}
	last := l1
	if shared {
		last = l2
	}
	if d, err := last.Allow(ctx, id); err != nil || d.Allowed {
		t.Fatalf("call 4: %+v, %v; want refused: the quota of 3 is spent", d, err)
	}
	_ = l1.Reset(ctx, id)
}

func open(t *testing.T, u string) *storeurl.Backend {
	t.Helper()
	b, err := storeurl.Open(u)
	if err != nil {
		t.Fatalf("Open(%q): %v", u, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("%s: Ping: %v", b.Name, err)
	}
	return b
}

func TestOpenDecidesOnRealServers(t *testing.T) {
	redis := testenv.RedisAddr(t)
	cluster := strings.Join(testenv.RedisClusterAddrs(t), ",")
	sentinel := testenv.RedisSentinelAddr(t)
	mc := strings.Join(testenv.MemcacheAddrs(t), ",")
	for _, c := range []struct {
		url    string
		shared bool
		name   string
	}{
		{"memory://?max_keys=1000", false, "memory (in-process)"},
		{"redis://" + redis + "/0?pool_size=4&dial_timeout=2s&clock_skew=2s", true, "redis " + redis},
		{"redis://" + redis + "?no_batch=true", true, "redis " + redis},
		{"redis+cluster://" + cluster + "?pipelines=4", true, "redis cluster " + cluster},
		{"redis+sentinel://" + sentinel + "/" + testenv.SentinelMaster, true, "redis sentinel " + sentinel + " master " + testenv.SentinelMaster},
		// valkey-go over redis-server: Debian has no valkey-server.
		{"valkey://" + redis + "?dial_timeout=2s", true, "valkey " + redis},
		{"valkey://" + testenv.RedisClusterAddrs(t)[0], true, "valkey " + testenv.RedisClusterAddrs(t)[0]},
		{"memcache://" + mc + "?timeout=1s&max_idle_conns=8", true, "memcached " + mc},
	} {
		t.Run(strings.SplitN(c.url, "?", 2)[0], func(t *testing.T) {
			b1 := open(t, c.url)
			if b1.Name != c.name {
				t.Errorf("Name %q, want %q", b1.Name, c.name)
			}
			b2 := b1
			if c.shared {
				b2 = open(t, c.url)
			}
			decide(t, c.shared, b1, b2)
		})
	}
}

// The URL's database and client options reach the client that decides.
func TestRedisOptionsReachTheClient(t *testing.T) {
	addr := testenv.RedisAddr(t)
	b := open(t, "redis://"+addr+"/3?pool_size=7&read_timeout=900ms")
	c := b.Store.(*sredis.Store).Client().(*goredis.Client)
	if o := c.Options(); o.DB != 3 || o.PoolSize != 7 || o.ReadTimeout != 900*time.Millisecond {
		t.Fatalf("client options DB=%d PoolSize=%d ReadTimeout=%v, want 3, 7, 900ms", o.DB, o.PoolSize, o.ReadTimeout)
	}
	p := core.Policy{Name: "storeurl-db", Limit: 1, Window: time.Hour}
	l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: b.Store, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("db-%d", rand.Int64())
	if d, err := l.Allow(t.Context(), id); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	raw := goredis.NewClient(&goredis.Options{Addr: addr, DB: 3})
	defer raw.Close()
	n, err := raw.Exists(t.Context(), l.Key(id).String()).Result()
	if err != nil || n != 1 {
		t.Fatalf("the key is not in database 3: %d, %v", n, err)
	}
	raw.Del(t.Context(), l.Key(id).String())
}

// protocol=2 opens valkey over RESP2: valkey-go's client-side cache,
// which the store does not use, needs RESP3, and without it turned off
// every Open failed as if the server were at fault.
func TestValkeyOverRESP2(t *testing.T) {
	addr := testenv.RedisAddr(t)
	b1 := open(t, "valkey://"+addr+"/0?protocol=2")
	b2 := open(t, "valkey://"+addr+"?protocol=2&dial_timeout=2s")
	decide(t, true, b1, b2)
}

func TestUnreachableValkeyIsNotABadURL(t *testing.T) {
	// A port nothing listens on: 1 is privileged and unused on loopback.
	for _, u := range []string{
		"valkey://127.0.0.1:1?dial_timeout=200ms",
		"valkey://127.0.0.1:1/2147483647?dial_timeout=200ms&protocol=2&write_timeout=3s",
		"valkeys://127.0.0.1:1?dial_timeout=200ms&skip_verify=true&protocol=3",
		"valkey://127.0.0.1:1/?db=3&dial_timeout=200ms",
	} {
		_, err := storeurl.Open(u)
		if err == nil || errors.Is(err, storeurl.ErrBadURL) || !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("Open(%q) of an unreachable valkey: %v; want ErrUnavailable, not ErrBadURL", u, err)
		}
	}
}

func ExampleOpen() {
	b, err := storeurl.Open("memory://?max_keys=10000")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	l, err := core.New(core.Config{
		Policy:    core.Policy{Name: "api", Limit: 1, Window: time.Minute},
		Algorithm: algorithm.GCRA{},
		Store:     b.Store,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, _ := l.Allow(context.Background(), "client-1")
	fmt.Println(b.Name, d.Allowed)
	_, err = storeurl.Open("redis://127.0.0.1:6379?pool_sise=10")
	fmt.Println(err)
	// Output:
	// memory (in-process) true
	// storeurl: "redis://127.0.0.1:6379?pool_sise=10": redis: unexpected option: pool_sise
}

// A closed Backend does not answer Ping, whatever its client does after
// Close (gomemcache's stays usable).
func TestPingAfterCloseFails(t *testing.T) {
	for _, u := range []string{"memory://", "memcache://127.0.0.1:1"} {
		b, err := storeurl.Open(u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		b.Close()
		if err := b.Ping(context.Background()); !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("%s: Ping after Close: %v, want an error matching ErrUnavailable", u, err)
		}
	}
}

// skip_verify reaches a cluster's TLS configuration, as it does a single
// node's (go-redis's cluster URL parser does not read it).
func TestClusterSkipVerify(t *testing.T) {
	b, err := storeurl.Open("rediss+cluster://127.0.0.1:7000?skip_verify=true")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := b.Store.(*sredis.Store).Client().(*goredis.ClusterClient)
	if tc := c.Options().TLSConfig; tc == nil || !tc.InsecureSkipVerify {
		t.Fatalf("TLS config %+v, want InsecureSkipVerify", tc)
	}
}

// Ping answers within its context on a Sentinel URL too, whatever the
// client's own dial timeouts: a sentinel that never answers, or refuses.
func TestSentinelPingKeepsItsContext(t *testing.T) {
	b, err := storeurl.Open("redis+sentinel://" + testenv.SilentListener(t) + "/m")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = b.Ping(ctx)
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("Ping of a silent sentinel with a 300ms context: %v after %v", err, took)
	}
	// A sentinel that refuses is said to, at once, not at the context's end.
	refusing, err := storeurl.Open("redis+sentinel://127.0.0.1:1/m")
	if err != nil {
		t.Fatal(err)
	}
	defer refusing.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start = time.Now()
	var oe *net.OpError
	if err := refusing.Ping(ctx); !errors.As(err, &oe) || time.Since(start) > time.Second {
		t.Fatalf("Ping of a refusing sentinel: %v after %v, want the refused dial at once", err, time.Since(start))
	}
}

// A URL far past any real one is not repeated whole in the error.
func TestLongURLErrorIsShort(t *testing.T) {
	_, err := storeurl.Open("redis://" + strings.Repeat("x", 1<<20) + ":bad")
	if !errors.Is(err, storeurl.ErrBadURL) || len(err.Error()) > 600 {
		t.Errorf("Open of a 1 MiB URL: a %d-byte error (matching ErrBadURL: %v), want a short one", len(err.Error()), errors.Is(err, storeurl.ErrBadURL))
	}
	if _, err := storeurl.Open("memcache://" + strings.Repeat("a", 1<<20) + ":11211"); err == nil || len(err.Error()) > 600 {
		t.Errorf("Open of a 1 MiB memcached host: a %d-byte error, want a short one", len(fmt.Sprint(err)))
	}
}

// A host name longer than DNS allows (253 bytes) is refused as the URL's
// mistake, on every scheme, before a client carries it in every message.
func TestHostNameTooLong(t *testing.T) {
	long := strings.Repeat("a", 254)
	for _, u := range []string{
		"redis://" + long + ":6379",
		"redis+cluster://127.0.0.1:7000," + long + ":7001",
		"redis+sentinel://" + long + ":26379/m",
		"valkey://" + long + ":6379",
		"memcache://127.0.0.1:11211," + long + ":11212",
		"redis+cluster://127.0.0.1:7000?addr=" + long + ":7001",
		"redis+sentinel://127.0.0.1:26379/m?addr=" + long + ":26380",
	} {
		b, err := storeurl.Open(u)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "253") {
			t.Errorf("Open(%.40q…): %v; want ErrBadURL saying a host name is at most 253 bytes", u, err)
		}
	}
	if b, err := storeurl.Open("redis+sentinel://127.0.0.1:26379/" + strings.Repeat("m", 257)); err == nil {
		b.Close()
		t.Error("a master name of 257 bytes was taken")
	} else if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "256") {
		t.Errorf("a master name of 257 bytes: %v; want ErrBadURL saying at most 256", err)
	}
	// 253 is still a name.
	b, err := storeurl.Open("redis://" + strings.Repeat("a", 253) + ":6379")
	if err != nil {
		t.Fatalf("a 253-byte host: %v", err)
	}
	b.Close()
}

// Close may be called from several goroutines at once: each returns, the
// store is closed once, and -race sees nothing.
func TestConcurrentClose(t *testing.T) {
	b, err := storeurl.Open("memory://")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _ = b.Close() })
	}
	wg.Wait()
	if err := b.Ping(context.Background()); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Ping after Close: %v", err)
	}
}

// muteProxy forwards loopback connections to target until Mute, when the
// connections already open go silent both ways (open, and nothing
// passes: a lost NAT or conntrack entry) while new ones still pass.
type muteProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	muted []*atomicBool
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) get() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

func newMuteProxy(t *testing.T, target string) *muteProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &muteProxy{ln: ln}
	var wg sync.WaitGroup
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			m := &atomicBool{}
			p.mu.Lock()
			p.muted = append(p.muted, m)
			conns = append(conns, c, s)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !m.get() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			wg.Go(func() { pipe(s, c) })
			wg.Go(func() { pipe(c, s) })
		}
	})
	return p
}

// Mute silences every connection open now.
func (p *muteProxy) Mute() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.muted {
		m.mu.Lock()
		m.v = true
		m.mu.Unlock()
	}
}

// A valkey:// store whose connections go silent while the server lives
// (a lost NAT entry) decides again within about three seconds: valkey-go
// closes a connection whose reply is write_timeout late (its ping, once a
// keep-alive period of 1s passes with no reply, finds it), 1s by default
// in a URL, where its own default (ten keep-alive periods) left calls
// beyond the store's own connections (8 callers here) failing for 12 s.
func TestValkeyRecoversFromSilentConnections(t *testing.T) {
	p := newMuteProxy(t, testenv.RedisAddr(t))
	b := open(t, "valkey://"+p.ln.Addr().String())
	l, err := core.New(core.Config{Policy: core.Policy{Name: "mute", Limit: 1_000_000_000, Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: b.Store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 20 {
		if _, err := l.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	p.Mute()
	start := time.Now()
	var mu sync.Mutex
	var late []time.Duration // failures past the first 4 s
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Since(start) < 6*time.Second {
				if _, err := l.Allow(ctx, "k"); err != nil {
					if at := time.Since(start); at > 4*time.Second {
						mu.Lock()
						late = append(late, at)
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if len(late) > 0 {
		t.Errorf("%d calls failed 4-6s after the connections went silent (the first at %v, the last at %v); want none", len(late), late[0].Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond))
	}
}

// Two URLs that list the same memcached servers in another order open
// stores that send each key to the same server: gomemcache picks a key's
// server by its position in the list, and instances configured in two
// orders split every key over two servers, each counting a quota of its
// own (10 admitted for a limit of 5). Opened with the list sorted, the
// fleet agrees whatever order each instance's URL gives.
func TestMemcacheServerOrderDoesNotSplitKeys(t *testing.T) {
	mc := testenv.MemcacheAddrs(t)
	if len(mc) < 2 {
		t.Fatalf("want two memcached servers, have %v", mc)
	}
	b1 := open(t, "memcache://"+mc[0]+","+mc[1])
	b2 := open(t, "memcache://"+mc[1]+","+mc[0])
	for i := range 4 { // over two servers, every key moves with the order
		t.Run(strconv.Itoa(i), func(t *testing.T) { decide(t, true, b1, b2) })
	}
	// One server spelt two ways: an IPv4-mapped IPv6 address sorts after
	// every IPv4 one as text, and a port with a leading zero is the same
	// port.
	h0, p0, err := net.SplitHostPort(mc[0])
	if err != nil || net.ParseIP(h0).To4() == nil {
		t.Fatalf("want an IPv4 address, have %q", mc[0])
	}
	b3 := open(t, "memcache://[::ffff:"+h0+"]:0"+p0+","+mc[1])
	for i := range 4 {
		t.Run("spelling"+strconv.Itoa(i), func(t *testing.T) { decide(t, true, b1, b3) })
	}
}

// A server listed twice would take two of the list's places, and a fleet
// whose instances list it once would send keys elsewhere: refused.
func TestMemcacheRepeatedServer(t *testing.T) {
	for _, u := range []string{
		"memcache://127.0.0.1:1,127.0.0.1:1", "memcache://127.0.0.1:11211,127.0.0.1", "memcache://[::1]:2,127.0.0.1:3,[::1]:2",
		// One server, two spellings.
		"memcache://[::1]:1,[0:0:0:0:0:0:0:1]:1", "memcache://127.0.0.1:1,127.0.0.1:01",
		"memcache://[::ffff:127.0.0.1]:1,127.0.0.1:1", "memcache://LOCALHOST:1,localhost:1",
		// A zone means nothing on an address that is not link-local.
		"memcache://[::1]:1,[::1%25lo]:1", "memcache://[::1%25x]:1,[::1%25y]:1",
	} {
		b, err := storeurl.Open(u)
		if err == nil {
			b.Close()
			t.Errorf("Open(%q): no error for a server listed twice", u)
			continue
		}
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "listed twice") {
			t.Errorf("Open(%q): %v; want a bad URL naming the repeat", u, err)
		}
	}
}

// A link-local address's zone picks an interface, by name or by index:
// both spellings of one interface are one server.
func TestMemcacheZoneByIndexAndName(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Fatalf("no network interfaces: %v", err)
	}
	i := ifs[0]
	u := fmt.Sprintf("memcache://[fe80::1%%25%d]:1,[fe80::1%%25%s]:1", i.Index, i.Name)
	b, err := storeurl.Open(u)
	if err == nil {
		b.Close()
		t.Fatalf("Open(%q): no error for one server listed twice", u)
	}
	if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("Open(%q): %v; want a bad URL naming the repeat", u, err)
	}
}
