package gin

import (
	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/adapters/nethttp"
)

// Middleware returns a gin.HandlerFunc that applies p: it hands the request
// to p.Admit with the route's FullPath and the context's values, aborts the
// chain when p refused the request (p has written the 429 or 503), and
// otherwise runs the rest of the chain, releasing concurrency leases when
// it returns or panics.
func Middleware(p *nethttp.Policy) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, ok := p.Admit(c.Writer, c.Request, c.FullPath(), values{c})
		if !ok {
			c.Abort()
			return
		}
		defer a.Done()
		c.Next()
	}
}

// New is nethttp.NewPolicy followed by Middleware.
func New(cfg nethttp.Config) (gin.HandlerFunc, error) {
	p, err := nethttp.NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	return Middleware(p), nil
}

// values looks a key up in the gin context's keys (c.Set), then in the
// request's context. It is one pointer wide, so passing it as an interface
// does not allocate.
type values struct{ c *gin.Context }

func (v values) Value(key any) any {
	if val, ok := v.c.Get(key); ok {
		return val
	}
	return v.c.Request.Context().Value(key)
}
