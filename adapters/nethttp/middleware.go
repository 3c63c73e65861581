package nethttp

import "net/http"

// Middleware returns net/http middleware that applies p to every request
// before next. The route a request matched is Request.Pattern, which
// ServeMux sets before it calls the handler: to limit by route, wrap the
// handler inside the mux (mux.Handle("POST /upload", mw(upload))), not the
// mux itself. The application's per-request values are read from the
// request's context.
//
// A concurrency lease is released when next returns, and also when it
// panics (the panic then goes on up the stack).
func Middleware(p *Policy) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a, ok := p.admit(w, r, r.Pattern, nil, true)
			if !ok {
				return
			}
			defer a.Done()
			next.ServeHTTP(w, r)
		})
	}
}

// New is NewPolicy followed by Middleware.
func New(cfg Config) (func(http.Handler) http.Handler, error) {
	p, err := NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	return Middleware(p), nil
}
