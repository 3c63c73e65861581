package nethttp

import (
	"fmt"
	"net/http"
	"path"
	"strings"
)

func (p *Policy) setSkipPaths(paths []string) error {
	for i, s := range paths {
		if !strings.HasPrefix(s, "/") || !cleanPath(s) {
			return fmt.Errorf("sluice/nethttp: SkipPaths[%d] %q: want a clean absolute path such as \"/healthz\" or \"/debug/\"", i, s)
		}
		if len(s) > 1 && strings.HasSuffix(s, "/") {
			p.skipTree = append(p.skipTree, s)
			continue
		}
		if p.skipExact == nil {
			p.skipExact = make(map[string]struct{}, len(paths))
		}
		p.skipExact[s] = struct{}{}
	}
	return nil
}

// skipRequest reports whether r's path, as the client sent it, is in
// SkipPaths: its escaped form when it differs from the default encoding
// of the decoded one (URL.RawPath), which some routers route on (echo, and
// net/http's ServeMux for "%2F", which stays in one segment), so that
// "/debug%2Fx" or "/%68ealthz" is never skipped as "/debug/x" or
// "/healthz" while it is routed elsewhere. The decoded path must be clean
// too: escaped dots are dots to a router or file server that cleans the
// decoded path, which serves "/debug/%2e%2e/admin" as "/admin".
func (p *Policy) skipRequest(r *http.Request) bool {
	if r.URL == nil || (p.skipExact == nil && p.skipTree == nil) {
		return false
	}
	if r.URL.RawPath != "" {
		return cleanPath(r.URL.Path) && p.skipPath(r.URL.RawPath)
	}
	return p.skipPath(r.URL.Path)
}

// skipPath reports whether a request path is in SkipPaths. Only clean paths
// match: a router that cleans "/healthz/../admin" into "/admin" must not
// thereby serve /admin unlimited.
func (p *Policy) skipPath(s string) bool {
	if p.skipExact == nil && p.skipTree == nil {
		return false
	}
	if !cleanPath(s) {
		return false
	}
	if _, ok := p.skipExact[s]; ok {
		return true
	}
	for _, t := range p.skipTree {
		if strings.HasPrefix(s, t) {
			return true
		}
	}
	return false
}

// cleanPath reports whether s is what path.Clean makes of it, allowing one
// trailing slash.
func cleanPath(s string) bool {
	if s == "" || s[0] != '/' {
		return false
	}
	t := s
	if len(t) > 1 && t[len(t)-1] == '/' {
		t = t[:len(t)-1]
	}
	return path.Clean(t) == t
}
