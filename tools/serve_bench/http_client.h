// The HTTP side of `kvtier serve-bench` (Boost.Beast over Asio, C++20 coroutines): a blocking GET
// for /v1/models and /metrics, and one streamed completion per call on a connection of its own,
// timed as it arrives.
//
// A streamed completion is read as OpenAI's SSE format (docs/engine.md "Serving"): every
// "data: {...}" event with a non-empty "choices" is a content event (its arrival time is a token
// time: the first one gives the TTFT, the gaps between them the inter-token latencies), the usage
// chunk gives the token counts, "data: [DONE]" ends it. Anything else is an error of the request,
// named in StreamResult::error_kind: "http NNN" (a non-200 answer), "connect", "broken stream"
// (the connection ended or failed before [DONE]), "timeout" (nothing for read_timeout), "error
// event" (the server reported an error mid-stream), "bad event" (not JSON), "no usage" (ended
// without the usage chunk).
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format off: <utility> must come first
#include <boost/asio.hpp>
// clang-format on
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/sequence.h"

namespace kvtier::serve_bench {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct StreamResult {
  int http_status = 0;         // 0: no HTTP response at all
  std::string error_kind;      // "": a whole stream (see above)
  std::string error;           // what went wrong, for the operator
  double ttft_s = -1;          // from the start of the call to the first content event; -1: none
  double latency_s = 0;        // from the start of the call to the end of the stream (or the error)
  std::vector<double> gaps_s;  // between consecutive content events
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_tokens = -1;  // -1: no usage
  // usage.prompt_tokens_details.kvtier_cached_from (kvtier serve's split of cached_tokens by
  // where the cache held them): engine, T0, T1, T2, T3; zeros when the server gives none.
  engine::CachedBySource cached_from{};
  int64_t preemptions = -1;  // usage.kvtier_preemptions (kvtier serve's); -1: none given
  std::string finish_reason;

  bool ok() const { return error_kind.empty(); }
};

// POST `target` with the JSON `body` on a new connection to `server` and reads the SSE stream to
// its end. Never throws; every failure is in the result. The whole call runs on the caller's
// executor.
asio::awaitable<StreamResult> StreamCompletion(tcp::endpoint server, std::string target,
                                               std::string body, std::chrono::seconds read_timeout);

// A blocking GET on a new connection: the body of a 200 answer, or Unavailable naming the target
// and what happened (connection refused, the status and the body's start).
absl::StatusOr<std::string> HttpGet(const tcp::endpoint& server, const std::string& target,
                                    std::chrono::seconds timeout);

// `host` (a name or an address) and `port` resolved to the first endpoint; Unavailable naming
// them if it does not resolve.
absl::StatusOr<tcp::endpoint> Resolve(const std::string& host, uint16_t port);

}  // namespace kvtier::serve_bench
