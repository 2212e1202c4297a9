// Sends requests at their arrival times, open loop, each on a connection of its own, and collects
// their results: one thread running one io_context, one coroutine per request (so hundreds of
// streams in flight cost a frame each, not a thread), results written to per-request slots.
//
// With max_in_flight > 0 a request due while that many are in flight waits for one to end (closed
// loop at the limit); its delay is reported (send_lag_s), so a schedule the client could not keep
// is seen, never hidden.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tools/serve_bench/http_client.h"

namespace kvtier::serve_bench {

// Request i's JSON body for POST /v1/completions, made when it is sent (a whole trace's prompts
// would not fit in memory at once).
using BodyMaker = std::function<std::string(size_t)>;

struct DriverOptions {
  int max_in_flight = 0;  // 0: no limit
  std::chrono::seconds read_timeout{600};
  // Called every progress_every with (requests ended, requests in flight, errors so far); on the
  // driver's thread. Unset: no progress.
  std::function<void(size_t, size_t, size_t)> on_progress;
  std::chrono::seconds progress_every{10};
};

struct DriverResult {
  std::vector<StreamResult> results;  // one per scheduled request, same order
  std::vector<double> send_lag_s;     // per request: when it was sent minus when it was due
  double wall_s = 0;                  // from the start to the last request's end
};

// Sends request i at arrivals_s[i] seconds after the start (in any order) to `server`; blocks
// until every one ended.
DriverResult RunSchedule(const tcp::endpoint& server, const std::vector<double>& arrivals_s,
                         const BodyMaker& make_body, const DriverOptions& options);

}  // namespace kvtier::serve_bench
