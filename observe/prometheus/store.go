package prometheus

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/store/memcache"
)

// evictor is what the memory store reports (memory.Store.Evictions).
type evictor interface{ Evictions() uint64 }

// casReporter is what the memcache store reports (memcache.Store.Stats).
type casReporter interface{ Stats() memcache.Stats }

// storeCollector reads a store's own counters at each scrape.
type storeCollector struct {
	evictions                            evictor
	cas                                  casReporter
	evicted, updates, attempts, conflict *prometheus.Desc
	contention                           *prometheus.Desc
}

// NewStoreCollector returns a prometheus.Collector of what store reports
// about itself, read at each scrape: evictions for a store with an
// Evictions() uint64 method (*memory.Store), compare-and-swap updates,
// attempts, conflicts and contention for a store with a Stats()
// memcache.Stats method (*memcache.Store). name is the store label of its
// series; namespace is the Observer's ("" means "sluice"). Register it
// with the Observer's registry. It returns an error for a store that
// reports none of these.
func NewStoreCollector(namespace, name string, store any) (prometheus.Collector, error) {
	if namespace == "" {
		namespace = "sluice"
	}
	c := &storeCollector{}
	c.evictions, _ = store.(evictor)
	c.cas, _ = store.(casReporter)
	if c.evictions == nil && c.cas == nil {
		return nil, fmt.Errorf("sluice/observe/prometheus: a %T reports neither evictions nor compare-and-swap attempts", store)
	}
	desc := func(n, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", n), help, nil, prometheus.Labels{"store": name})
	}
	c.evicted = desc("store_evictions_total", "Live keys the store evicted to make room (each may have admitted up to one more quota).")
	c.updates = desc("cas_updates_total", "Updates that ran the compare-and-swap loop.")
	c.attempts = desc("cas_attempts_total", "Compare-and-swap attempts those updates made (attempts - updates = retries).")
	c.conflict = desc("cas_conflicts_total", "Swaps that lost to another writer.")
	c.contention = desc("cas_contention_total", "Updates that gave up after the retry bound.")
	return c, nil
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.evictions != nil {
		ch <- c.evicted
	}
	if c.cas != nil {
		ch <- c.updates
		ch <- c.attempts
		ch <- c.conflict
		ch <- c.contention
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.evictions != nil {
		ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(c.evictions.Evictions()))
	}
	if c.cas != nil {
		st := c.cas.Stats() // one snapshot, so the series agree
		var attempts uint64
		for i, n := range st.Attempts {
			attempts += uint64(i) * n
		}
		ch <- prometheus.MustNewConstMetric(c.updates, prometheus.CounterValue, float64(st.Updates))
		ch <- prometheus.MustNewConstMetric(c.attempts, prometheus.CounterValue, float64(attempts))
		ch <- prometheus.MustNewConstMetric(c.conflict, prometheus.CounterValue, float64(st.Conflicts))
		ch <- prometheus.MustNewConstMetric(c.contention, prometheus.CounterValue, float64(st.Contention))
	}
}
