package nethttp

import (
	"encoding/json"
	"net/http"
)

// Problem types (RFC 9457) registered by draft-ietf-httpapi-ratelimit-headers.
const (
	// ProblemQuotaExceeded is the type of a 429: a quota was exceeded.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemReducedCapacity is the type of a 503: the limit could not be
	// checked, and the failure policy is fail closed.
	ProblemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	// ContentTypeProblem is the media type of every body the policy writes.
	ContentTypeProblem = "application/problem+json"
)

// Problem is the RFC 9457 problem details body of a response the policy
// writes itself: 429 (quota exceeded) and 503 (the store could not decide,
// or the request was cancelled while it waited). It never names the
// client's identity.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the layers that refused the request (or could
	// not decide it), as the draft's problem types define.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

type problemKind int

const (
	quotaExceeded problemKind = iota
	reducedCapacity
	cancelled
	notMade
)

// uncheckedDetail is the detail of a 503 when the store could not decide.
const uncheckedDetail = "The rate limit could not be checked."

// problemBody is the problem of kind k with detail, naming policies in
// violated-policies (none: the member is left out).
func problemBody(k problemKind, detail string, policies ...string) []byte {
	pr := Problem{Detail: detail, ViolatedPolicies: policies}
	switch k {
	case quotaExceeded:
		pr.Type, pr.Status = ProblemQuotaExceeded, http.StatusTooManyRequests
		pr.Title = "Request cannot be satisfied as assigned quota has been exceeded"
	case reducedCapacity:
		pr.Type, pr.Status = ProblemReducedCapacity, http.StatusServiceUnavailable
		pr.Title = "Request cannot be satisfied due to temporary server capacity constraints"
	case cancelled:
		pr.Type, pr.Status = "about:blank", http.StatusServiceUnavailable
		pr.Title = http.StatusText(http.StatusServiceUnavailable)
	case notMade:
		pr.Type, pr.Status = "about:blank", http.StatusInternalServerError
		pr.Title = http.StatusText(http.StatusInternalServerError)
	}
	// Only strings and an int are marshalled: this cannot fail.
	b, _ := json.Marshal(pr)
	return b
}

var cancelledBody = problemBody(cancelled, "The request was cancelled before the rate limit admitted it.")

// notMadeBody answers every request of a Policy NewPolicy did not make.
var notMadeBody = problemBody(notMade, "The server's rate limit is not configured: its nethttp.Policy was not made by NewPolicy.")

// writeProblem sends a problem body with its status. The status is the
// body's own: 429 for quotaExceeded, 500 for notMade, 503 otherwise.
func writeProblem(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{ContentTypeProblem}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
