package serve

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are what /metrics exports, in a registry of the server's own.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec   // endpoint, code
	latency    *prometheus.HistogramVec // endpoint
	verdicts   *prometheus.CounterVec   // verdict
	bytesRead  *prometheus.CounterVec   // source: upload, remote, local
	decoded    prometheus.Counter       // bytes compressed inputs decompressed to
	inFlight   prometheus.Gauge
	queued     prometheus.Gauge
	rejections *prometheus.CounterVec // reason
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "requests_total",
		Help: "HTTP requests answered, by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "request_duration_seconds",
		Help:    "Time from request to the end of the response, by endpoint.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"endpoint"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "verdicts_total",
		Help: "Files scanned, by verdict (clean, invalid, unsupported, dangerous, error).",
	}, []string{"verdict"})
	m.bytesRead = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "bytes_read_total",
		Help: "Bytes read: uploaded, received from remote locations, read from files under the root.",
	}, []string{"source"})
	m.decoded = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "decompressed_bytes_total",
		Help: "Bytes the frames of compressed inputs decompressed to (bounded per file by --max-expanded and --max-expansion).",
	})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "audits_in_flight",
		Help: "Audits running now.",
	})
	m.queued = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "audits_queued",
		Help: "Audits admitted and waiting for a slot.",
	})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "safetensors", Subsystem: "serve", Name: "rejected_total",
		Help: "Requests refused, by reason (unauthorized, forbidden, overload, too_large, slow, bad_request).",
	}, []string{"reason"})
	m.reg.MustRegister(m.requests, m.latency, m.verdicts, m.bytesRead, m.decoded, m.inFlight, m.queued, m.rejections,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, v := range []string{"clean", "invalid", "unsupported", "dangerous", "error"} {
		m.verdicts.WithLabelValues(v)
	}
	for _, s := range []string{"upload", "remote", "local"} {
		m.bytesRead.WithLabelValues(s)
	}
	return m
}
