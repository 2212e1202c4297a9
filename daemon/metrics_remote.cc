// The remote tier's families (docs/metrics.md "Remote tier"): what its store client counts
// (RemoteStoreStats), read at scrape time like the other tiers' counters.
#include <limits>
#include <string>
#include <utility>

#include "daemon/metrics_tiers.h"

namespace kvtier::internal {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

double Num(uint64_t v) { return static_cast<double>(v); }

struct Sample {
  const char* label_value;  // of the family's label; null for a family without one
  double value;
};

// A family whose samples differ in one label (`label`), each also labelled tier="T3".
MetricFamily Series(std::string name, std::string help, MetricType type, const char* label,
                    std::initializer_list<Sample> samples) {
  MetricFamily f = NewFamily(std::move(name), std::move(help), type);
  for (const Sample& s : samples) {
    std::vector<ClientMetric::Label> labels;
    if (label != nullptr) labels.push_back({label, s.label_value});
    labels.push_back({"tier", "T3"});
    AddSample(f, std::move(labels), s.value);
  }
  return f;
}

void AddHistogram(MetricFamily& f, const char* op, const RemoteLatency& l) {
  ClientMetric m;
  m.label = {{"op", op}, {"tier", "T3"}};
  uint64_t cumulative = 0;
  for (size_t b = 0; b < l.buckets.size(); ++b) {
    cumulative += l.buckets[b];
    const double bound = b < RemoteLatency::kBoundsSeconds.size()
                             ? RemoteLatency::kBoundsSeconds[b]
                             : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back({cumulative, bound});
  }
  m.histogram.sample_count = l.count;
  m.histogram.sample_sum = l.sum_seconds;
  f.metric.push_back(std::move(m));
}

// Latency per call, by op.
MetricFamily LatencyFamily(const RemoteStoreStats& s) {
  MetricFamily seconds = NewFamily("kvtier_remote_seconds",
                                   "Latency of one call to the remote store (a pipelined batch), "
                                   "by op (probe: a lookup's STRLEN).",
                                   MetricType::Histogram);
  AddHistogram(seconds, "get", s.get_latency);
  AddHistogram(seconds, "put", s.put_latency);
  AddHistogram(seconds, "probe", s.exists_latency);
  return seconds;
}

}  // namespace

std::vector<MetricFamily> RemoteFamilies(const RemoteStoreStats& s) {
  std::vector<MetricFamily> out;
  out.push_back(Series("kvtier_remote_blocks_total",
                       "Blocks read from or written to the remote store, by outcome (corrupt: a "
                       "value that failed its header or checksum check, counted as a miss too, "
                       "never served).",
                       MetricType::Counter, "result",
                       {{"hit", Num(s.hits)},
                        {"miss", Num(s.misses)},
                        {"corrupt", Num(s.corrupt_values)},
                        {"stored", Num(s.stored)},
                        {"probed", Num(s.exists_items)},
                        {"probe_found", Num(s.exists_found)}}));
  out.push_back(Series("kvtier_remote_bytes_total",
                       "Payload bytes read from and written to the remote store.",
                       MetricType::Counter, "direction",
                       {{"read", Num(s.bytes_read)}, {"written", Num(s.bytes_written)}}));
  out.push_back(Series("kvtier_remote_errors_total",
                       "Remote store items that got no answer, by kind.", MetricType::Counter,
                       "kind",
                       {{"timeout", Num(s.errors_timeout)},
                        {"connection", Num(s.errors_connection)},
                        {"protocol", Num(s.errors_protocol)},
                        {"auth", Num(s.errors_auth)},
                        {"server", Num(s.errors_server)},
                        {"bad_put", Num(s.errors_bad_put)},
                        {"breaker_open", Num(s.breaker.refused)}}));
  out.push_back(Series("kvtier_remote_nodes",
                       "Store nodes the slot map sends keys to (serving), and those of them whose "
                       "last contact succeeded (up).",
                       MetricType::Gauge, "state",
                       {{"serving", Num(s.router.nodes_serving)}, {"up", Num(s.router.nodes_up)}}));
  out.push_back(Series("kvtier_remote_available",
                       "1 while the remote store is available, 0 while its circuit breaker is "
                       "open (or probing whether the store is back).",
                       MetricType::Gauge, nullptr, {{nullptr, s.breaker.available ? 1.0 : 0.0}}));
  out.push_back(Series("kvtier_remote_breaker_opens_total",
                       "Times the remote store was marked unavailable.", MetricType::Counter,
                       nullptr, {{nullptr, Num(s.breaker.opens)}}));
  out.push_back(LatencyFamily(s));
  return out;
}

}  // namespace kvtier::internal
