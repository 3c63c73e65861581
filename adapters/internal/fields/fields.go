// Package fields writes the IETF RateLimit-Policy items
// (draft-ietf-httpapi-ratelimit-headers) that every door of Sluice sends:
// the HTTP policy's header fields and the gRPC interceptors' metadata are
// the same text.
package fields

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
)

// AppendPolicyItem writes one RateLimit-Policy item to b. q is the long-run
// quota per window w. For a bucket algorithm, whose burst (the quota a
// client sees at once, Decision.Limit) differs from the rate, the burst is
// the vendor parameter sluice-burst. A window that is not a whole number of
// seconds has no w (the field has no sub-second precision, and rounding it
// would misstate the rate). A concurrency limit has no window; its unit is
// concurrent-requests.
func AppendPolicyItem(b *strings.Builder, p *core.Policy, concurrency bool, quota int64) {
	b.WriteString(`"`)
	b.WriteString(p.Name)
	b.WriteString(`";q=`)
	b.WriteString(strconv.FormatInt(p.Limit, 10))
	if concurrency {
		b.WriteString(`;qu="concurrent-requests"`)
		return
	}
	if p.Window%time.Second == 0 {
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(int64(p.Window/time.Second), 10))
	}
	if quota != p.Limit {
		b.WriteString(";sluice-burst=")
		b.WriteString(strconv.FormatInt(quota, 10))
	}
}
