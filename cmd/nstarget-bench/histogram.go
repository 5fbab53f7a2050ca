package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// histogram is a Prometheus histogram as scraped: cumulative counts by
// upper bound, the last bound +Inf. A phase's histogram is the difference
// of two scrapes of the same process (sub), and several phases or series
// add up (add) when their bounds are the same.
type histogram struct {
	bounds []float64 // seconds, ascending, +Inf last
	cum    []float64 // cumulative counts, one per bound
	sum    float64   // seconds
}

// scrape is one scrape's histograms of one metric, by the value of one label
// ("" for a metric without it).
type scrape map[string]histogram

// parseHistograms reads the Prometheus text exposition in r and returns the
// histograms of metric name by the value of label.
func parseHistograms(r io.Reader, name, label string) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := scrape{}
	mf, ok := families[name]
	if !ok {
		return out, nil
	}
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		return nil, fmt.Errorf("%s is a %v, not a histogram", name, mf.GetType())
	}
	for _, m := range mf.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		h := m.GetHistogram()
		var hist histogram
		for _, b := range h.GetBucket() {
			hist.bounds = append(hist.bounds, b.GetUpperBound())
			hist.cum = append(hist.cum, float64(b.GetCumulativeCount()))
		}
		// the text format always has +Inf; the parser keeps it as a bucket
		// or folds it into the sample count
		if n := len(hist.bounds); n == 0 || !math.IsInf(hist.bounds[n-1], 1) {
			hist.bounds = append(hist.bounds, math.Inf(1))
			hist.cum = append(hist.cum, float64(h.GetSampleCount()))
		}
		hist.sum = h.GetSampleSum()
		out[key] = hist
	}
	return out, nil
}

// count is the number of observations.
func (h histogram) count() float64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// mean is the exact mean of the observations (sum over count), unlike the
// quantiles, which the buckets bound.
func (h histogram) mean() time.Duration {
	if h.count() == 0 {
		return 0
	}
	return secs(h.sum / h.count())
}

// sub is the observations made between an earlier scrape of the same
// process (prev, the zero histogram when the series was not there yet) and h.
func (h histogram) sub(prev histogram) (histogram, error) {
	if len(prev.bounds) == 0 {
		return h, nil
	}
	if !slices.Equal(h.bounds, prev.bounds) {
		return histogram{}, fmt.Errorf("bucket bounds changed between scrapes: %v, then %v", prev.bounds, h.bounds)
	}
	d := histogram{bounds: h.bounds, cum: make([]float64, len(h.cum)), sum: h.sum - prev.sum}
	for i := range h.cum {
		d.cum[i] = h.cum[i] - prev.cum[i]
		if d.cum[i] < 0 {
			return histogram{}, fmt.Errorf("counts went back between scrapes (a restart?): le %g from %g to %g", h.bounds[i], prev.cum[i], h.cum[i])
		}
	}
	return d, nil
}

// add is both histograms' observations together.
func (h histogram) add(o histogram) (histogram, error) {
	switch {
	case len(h.bounds) == 0:
		return o, nil
	case len(o.bounds) == 0:
		return h, nil
	case !slices.Equal(h.bounds, o.bounds):
		return histogram{}, fmt.Errorf("different bucket bounds: %v and %v", h.bounds, o.bounds)
	}
	s := histogram{bounds: h.bounds, cum: make([]float64, len(h.cum)), sum: h.sum + o.sum}
	for i := range h.cum {
		s.cum[i] = h.cum[i] + o.cum[i]
	}
	return s, nil
}

// quantile is the q-quantile as Prometheus's histogram_quantile computes it
// (linear within the bucket that holds it, the first bucket from 0), with
// that bucket's bounds: the value is known only to lie in (lo, hi]. In
// the +Inf bucket it is the highest finite bound, and hi is +Inf. NaN
// without observations.
func (h histogram) quantile(q float64) (v, lo, hi float64) {
	n := h.count()
	if n == 0 {
		return math.NaN(), 0, 0
	}
	rank := q * n
	i, _ := slices.BinarySearch(h.cum, rank) // the first bucket whose count reaches rank
	for i < len(h.cum)-1 && h.cum[i] < rank {
		i++
	}
	if i > 0 {
		lo = h.bounds[i-1]
	}
	hi = h.bounds[i]
	if math.IsInf(hi, 1) {
		return lo, lo, hi
	}
	below := 0.0
	if i > 0 {
		below = h.cum[i-1]
	}
	in := h.cum[i] - below
	if in == 0 {
		return hi, lo, hi
	}
	return lo + (hi-lo)*(rank-below)/in, lo, hi
}

// quantileString is the q-quantile with the bucket it lies in, e.g.
// "3.1ms (≤ 5ms)" or "7.9ms (5ms–12.5ms)".
func (h histogram) quantileString(q float64) string {
	v, lo, hi := h.quantile(q)
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(hi, 1):
		return fmt.Sprintf("> %v", secs(lo))
	case lo == 0:
		return fmt.Sprintf("%v (≤ %v)", round(secs(v)), secs(hi))
	}
	return fmt.Sprintf("%v (%v–%v)", round(secs(v)), secs(lo), secs(hi))
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
