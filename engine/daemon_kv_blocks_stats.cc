// DaemonKvBlocksStats' line for a log, and the timer of its calls (daemon_kv_blocks.h).
#include <fmt/format.h>

#include <string>

#include "engine/daemon_kv_blocks.h"

namespace kvtier::engine {

KvCallTimer::KvCallTimer(DaemonKvBlocksStats& stats, KvCall call)
    : stats_(stats), call_(call), start_(std::chrono::steady_clock::now()) {}

KvCallTimer::~KvCallTimer() {
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start_;
  stats_.call_ms[static_cast<size_t>(call_)] += took.count();
}

std::string FormatStats(const DaemonKvBlocksStats& s) {
  constexpr const char* kNames[kKvCalls] = {"lookup", "lease",   "release",  "take",
                                            "free",   "publish", "checksum", "keys"};
  std::string ms;
  for (size_t i = 0; i < kKvCalls; ++i) {
    ms += fmt::format("{}{} {:.1f}", i == 0 ? "" : ", ", kNames[i], s.call_ms[i]);
  }
  return fmt::format(
      "lookups {} in {} batches, loads {} (deferred {}), leased {}, attached {}, published {} in "
      "{} calls "
      "(already present {}), working taken {} freed {}; ms in calls: {}",
      s.lookups, s.lookup_batches, s.loads, s.loads_deferred, s.leased_blocks, s.attached_blocks,
      s.published, s.publish_calls, s.already_present, s.working_taken, s.working_freed, ms);
}

}  // namespace kvtier::engine
