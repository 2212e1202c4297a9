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

MetricFamily Family(std::string name, std::string help, MetricType type) {
  return NewFamily(std::move(name), std::move(help), type);
}

void Add(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
  AddSample(f, std::move(labels), value);
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

}  // namespace

std::vector<MetricFamily> RemoteFamilies(const RemoteStoreStats& s) {
  const std::vector<ClientMetric::Label> t3 = {{"tier", "T3"}};
  auto with = [&](const char* name, const char* value) {
    return std::vector<ClientMetric::Label>{{name, value}, {"tier", "T3"}};
  };
  MetricFamily blocks = Family("kvtier_remote_blocks_total",
                               "Blocks read from or written to the remote store, by outcome "
                               "(corrupt: a value that failed its header or checksum check, "
                               "counted as a miss too, never served).",
                               MetricType::Counter);
  Add(blocks, with("result", "hit"), static_cast<double>(s.hits));
  Add(blocks, with("result", "miss"), static_cast<double>(s.misses));
  Add(blocks, with("result", "corrupt"), static_cast<double>(s.corrupt_values));
  Add(blocks, with("result", "stored"), static_cast<double>(s.stored));
  Add(blocks, with("result", "probed"), static_cast<double>(s.exists_items));
  Add(blocks, with("result", "probe_found"), static_cast<double>(s.exists_found));
  MetricFamily bytes =
      Family("kvtier_remote_bytes_total",
             "Payload bytes read from and written to the remote store.", MetricType::Counter);
  Add(bytes, with("direction", "read"), static_cast<double>(s.bytes_read));
  Add(bytes, with("direction", "written"), static_cast<double>(s.bytes_written));
  MetricFamily errors =
      Family("kvtier_remote_errors_total", "Remote store items that got no answer, by kind.",
             MetricType::Counter);
  Add(errors, with("kind", "timeout"), static_cast<double>(s.errors_timeout));
  Add(errors, with("kind", "connection"), static_cast<double>(s.errors_connection));
  Add(errors, with("kind", "protocol"), static_cast<double>(s.errors_protocol));
  Add(errors, with("kind", "auth"), static_cast<double>(s.errors_auth));
  Add(errors, with("kind", "server"), static_cast<double>(s.errors_server));
  Add(errors, with("kind", "bad_put"), static_cast<double>(s.errors_bad_put));
  Add(errors, with("kind", "breaker_open"), static_cast<double>(s.breaker.refused));
  MetricFamily nodes = Family("kvtier_remote_nodes",
                              "Store nodes the slot map sends keys to (serving), and those of "
                              "them whose last contact succeeded (up).",
                              MetricType::Gauge);
  Add(nodes, with("state", "serving"), s.router.nodes_serving);
  Add(nodes, with("state", "up"), s.router.nodes_up);
  MetricFamily available = Family("kvtier_remote_available",
                                  "1 while the remote store is available, 0 while its circuit "
                                  "breaker is open.",
                                  MetricType::Gauge);
  Add(available, t3, s.breaker.available ? 1 : 0);
  MetricFamily opens =
      Family("kvtier_remote_breaker_opens_total", "Times the remote store was marked unavailable.",
             MetricType::Counter);
  Add(opens, t3, static_cast<double>(s.breaker.opens));
  MetricFamily seconds = Family("kvtier_remote_seconds",
                                "Latency of one call to the remote store (a pipelined batch), by "
                                "op (probe: a lookup's STRLEN/EXISTS).",
                                MetricType::Histogram);
  AddHistogram(seconds, "get", s.get_latency);
  AddHistogram(seconds, "put", s.put_latency);
  AddHistogram(seconds, "probe", s.exists_latency);
  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&blocks, &bytes, &errors, &nodes, &available, &opens, &seconds}) {
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace kvtier::internal
