#include "tools/stat/stat_view.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <set>

namespace kvtier::stat {
namespace {

// A counter's total now and its rate over the interval ("-" without an earlier sample).
struct Counter {
  double total = 0;
  std::optional<double> delta;
};

class Reader {
 public:
  explicit Reader(const StatInput& in) : in_(in) {}

  Counter Sum(const std::string& name) const {
    Counter c{in_.now.Sum(name), std::nullopt};
    if (in_.before) c.delta = c.total - in_.before->Sum(name);
    return c;
  }
  Counter Where(const std::string& name, const std::string& label, const std::string& v) const {
    return Where(name, {{label, v}});
  }
  Counter Where(const std::string& name, const std::map<std::string, std::string>& labels) const {
    Counter c{in_.now.SumWhere(name, labels), std::nullopt};
    if (in_.before) c.delta = c.total - in_.before->SumWhere(name, labels);
    return c;
  }
  std::string Rate(const Counter& c, bool bytes = false) const {
    if (!c.delta || in_.interval_s <= 0) return "-";
    const double r = *c.delta / in_.interval_s;
    return bytes ? HumanBytes(r) + "/s" : fmt::format("{:.1f}/s", r);
  }

 private:
  const StatInput& in_;
};

std::string Percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100 * part / whole) : "-";
}
std::string Percent(const std::optional<double>& part, const std::optional<double>& whole) {
  return part && whole ? Percent(*part, *whole) : "-";
}

// One row of the tier table: the tier's series with `labels` ({tier}, or {pool, tier}).
std::string TierRow(const StatInput& in, const Reader& r,
                    const std::map<std::string, std::string>& labels) {
  const double cap = in.now.SumWhere("kvtier_tier_capacity_bytes", labels);
  const double used = in.now.SumWhere("kvtier_tier_used_bytes", labels);
  const bool admitting = in.now.SumWhere("kvtier_tier_admitting", labels) > 0;
  return fmt::format("{:>11} {:>11} {:>9} {:>9} {:>13} {:>11}\n", HumanBytes(cap), HumanBytes(used),
                     Percent(used, cap), admitting ? "yes" : "NO",
                     r.Rate(r.Where("kvtier_evictions_total", labels)),
                     r.Rate(r.Where("kvtier_dropped_blocks_total", labels)));
}

// A row per tier; a daemon of several pools (a `pool` label on its tier families): a row per pool
// and tier, the pool first.
std::string TierTable(const StatInput& in, const Reader& r) {
  const std::set<std::string> pools = in.now.LabelValues("kvtier_tier_capacity_bytes", "pool");
  const std::set<std::string> tiers = in.now.LabelValues("kvtier_tier_capacity_bytes", "tier");
  const std::string head =
      fmt::format("{:<5} {:>11} {:>11} {:>9} {:>9} {:>13} {:>11}\n", "tier", "capacity", "used",
                  "occupancy", "admitting", "evictions/s", "dropped/s");
  if (pools.empty()) {
    std::string out = head;
    for (const std::string& tier : tiers) {
      out += fmt::format("{:<5} ", tier) + TierRow(in, r, {{"tier", tier}});
    }
    return out;
  }
  std::string out = fmt::format("{:<16} ", "pool") + head;
  for (const std::string& pool : pools) {
    for (const std::string& tier : in.now.LabelValues("kvtier_tier_capacity_bytes", "tier")) {
      if (in.now.SumWhere("kvtier_tier_capacity_bytes", {{"pool", pool}, {"tier", tier}}) == 0) {
        continue;  // a tier this pool does not run
      }
      out += fmt::format("{:<16} {:<5} ", pool, tier) +
             TierRow(in, r, {{"pool", pool}, {"tier", tier}});
    }
  }
  return out;
}

std::string Line(const std::string& name, const Counter& c, const std::string& rate) {
  return fmt::format("{:<26} {:>16.0f} {:>16}\n", name, c.total, rate);
}

std::string Requests(const Reader& r) {
  std::string out = fmt::format("{:<26} {:>16} {:>16}\n", "requests", "total", "rate");
  out += Line("lookups", r.Sum("kvtier_lookups_total"), r.Rate(r.Sum("kvtier_lookups_total")));
  const Counter keys = r.Sum("kvtier_lookup_blocks_total");
  out += Line("lookup keys", keys, r.Rate(keys));
  for (const char* result : {"stored", "already_present", "refused"}) {
    const Counter c = r.Where("kvtier_put_blocks_total", "result", result);
    out += Line(fmt::format("put blocks {}", result), c, r.Rate(c));
  }
  for (const char* result : {"t1", "promoted", "missing"}) {
    const Counter c = r.Where("kvtier_get_blocks_total", "result", result);
    out += Line(fmt::format("get blocks {}", result), c, r.Rate(c));
  }
  return out;
}

std::string HitRatios(const StatInput& in, const Reader& r) {
  const Counter all = r.Sum("kvtier_lookup_blocks_total");
  const Counter hit = r.Where("kvtier_lookup_blocks_total", "result", "hit");
  std::string out =
      fmt::format("{:<26} {:>16} {:>16}\n", "hit ratio (blocks)", "total", "interval");
  out += fmt::format("{:<26} {:>16} {:>16}\n", "all tiers", Percent(hit.total, all.total),
                     Percent(hit.delta, all.delta));
  for (const std::string& tier : in.now.LabelValues("kvtier_hit_blocks_total", "tier")) {
    const Counter t = r.Where("kvtier_hit_blocks_total", "tier", tier);
    out += fmt::format("{:<26} {:>16} {:>16}\n", "  " + tier, Percent(t.total, all.total),
                       Percent(t.delta, all.delta));
  }
  return out;
}

std::string Moved(const StatInput& in, const Reader& r) {
  std::string out = fmt::format("{:<26} {:>16} {:>16}\n", "bytes moved", "total", "rate");
  for (const std::string& d : in.now.LabelValues("kvtier_moved_bytes_total", "direction")) {
    const Counter c = r.Where("kvtier_moved_bytes_total", "direction", d);
    out += fmt::format("{:<26} {:>16} {:>16}\n", d, HumanBytes(c.total), r.Rate(c, true));
  }
  return out;
}

std::string SocketStats(const StatInput& in) {
  const protocol::StatsWire& s = *in.stats;
  return fmt::format(
      "socket {}: lookups {} (keys {}, hit blocks {}), gets {} (blocks {}, promotions {}), puts "
      "committed {} of {} begun (aborted {}, retry {}), T1 slots used {} of {}, leases {}, "
      "invalid requests {}\n",
      in.socket_path, s.lookups, s.lookup_keys, s.lookup_hit_blocks, s.gets, s.get_blocks,
      s.promotions, s.puts_committed, s.puts_begun, s.puts_aborted, s.puts_retry,
      s.t1_slots_total - s.t1_slots_free, s.t1_slots_total, s.leases_held, s.requests_invalid);
}

}  // namespace

std::string HumanBytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < kUnits.size()) bytes /= 1024, ++unit;
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

std::string FormatStatScreen(const StatInput& in) {
  const Reader r(in);
  const auto version = in.now.LabelValues("kvtier_build_info", "version");
  std::string out = fmt::format(
      "kvtierd {} at {}: {} clients, {} leases held, {}\n\n",
      version.empty() ? "?" : *version.begin(), in.source, in.now.Sum("kvtier_connected_clients"),
      in.now.Sum("kvtier_leases_held"),
      in.before ? fmt::format("rates over {:.2f} s", in.interval_s) : "no rates (one scrape)");
  if (!in.source.empty()) {
    out += TierTable(in, r) + "\n" + HitRatios(in, r) + "\n" + Requests(r) + "\n" + Moved(in, r);
  }
  if (in.stats) out += "\n" + SocketStats(in);
  return out;
}

}  // namespace kvtier::stat
