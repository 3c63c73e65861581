package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/core"
	sluiceprom "github.com/sluicehq/sluice/observe/prometheus"
)

// metricsFlag adds --metrics to fs: an address at which the command serves
// the Prometheus metrics of its limiters while it runs.
func metricsFlag(fs *flagSet) *string {
	return fs.String("metrics", "", "serve Prometheus metrics of the run at this address (e.g. 127.0.0.1:9090), /metrics")
}

// metricsServer is the --metrics endpoint of one run.
type metricsServer struct {
	obs *sluiceprom.Observer
	srv *http.Server
	ln  net.Listener
}

// startMetrics serves /metrics at addr and returns the observer to give
// the run's limiters; nil, nil for an empty addr.
func startMetrics(addr string, stdout io.Writer) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	obs, err := sluiceprom.New(reg, sluiceprom.Options{})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usagef("--metrics %q: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{obs: obs, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = m.srv.Serve(ln) }()
	fmt.Fprintf(stdout, "metrics at http://%s/metrics\n", ln.Addr())
	return m, nil
}

// observer is the Observer for core.Config: nil when --metrics is off.
func (m *metricsServer) observer() func(core.Event) {
	if m == nil {
		return nil
	}
	return m.obs.Observe
}

// stop shuts the endpoint down, waiting briefly for a scrape under way.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = m.srv.Close()
	}
}
