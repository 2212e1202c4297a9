#include "tools/serve_bench/arrival_driver.h"

#include <algorithm>
#include <memory>
#include <numeric>

namespace kvtier::serve_bench {
namespace {

using Clock = std::chrono::steady_clock;
using Timer = asio::steady_timer;

// Everything the coroutines share; they all run on the one thread of the io_context, so no lock.
struct Run {
  Run(asio::io_context& io, const tcp::endpoint& s, const std::vector<double>& a,
      const BodyMaker& m, const DriverOptions& o)
      : server(s), arrivals_s(a), make_body(m), options(o), slot_freed(io), progress(io) {
    result.results.resize(a.size());
    result.send_lag_s.resize(a.size());
    slot_freed.expires_at(Timer::time_point::max());
  }

  const tcp::endpoint server;
  const std::vector<double>& arrivals_s;
  const BodyMaker& make_body;
  const DriverOptions& options;
  Clock::time_point start = Clock::now();
  Clock::time_point last_end = start;
  size_t in_flight = 0, ended = 0, errors = 0;
  Timer slot_freed;  // cancelled when a request ends
  Timer progress;    // the progress ticker's; cancelled when the last request ends
  DriverResult result;
};

asio::awaitable<void> Send(Run& run, size_t i) {
  run.result.results[i] = co_await StreamCompletion(run.server, "/v1/completions", run.make_body(i),
                                                    run.options.read_timeout);
  --run.in_flight;
  ++run.ended;
  if (!run.result.results[i].ok()) ++run.errors;
  run.last_end = Clock::now();
  run.slot_freed.cancel();
  if (run.ended == run.arrivals_s.size()) run.progress.cancel();
}

asio::awaitable<void> Dispatch(Run& run) {
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  std::vector<size_t> order(run.arrivals_s.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return run.arrivals_s[a] < run.arrivals_s[b]; });
  Timer timer(ex);
  boost::system::error_code ec;
  for (const size_t i : order) {
    const auto due = run.start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(run.arrivals_s[i]));
    timer.expires_at(due);
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    while (run.options.max_in_flight > 0 &&
           run.in_flight >= static_cast<size_t>(run.options.max_in_flight)) {
      co_await run.slot_freed.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      run.slot_freed.expires_at(Timer::time_point::max());
    }
    run.result.send_lag_s[i] = std::chrono::duration<double>(Clock::now() - due).count();
    ++run.in_flight;
    asio::co_spawn(ex, Send(run, i), asio::detached);
  }
}

asio::awaitable<void> Progress(Run& run) {
  boost::system::error_code ec;
  while (run.ended < run.arrivals_s.size()) {
    run.progress.expires_after(run.options.progress_every);
    co_await run.progress.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (run.ended < run.arrivals_s.size())
      run.options.on_progress(run.ended, run.in_flight, run.errors);
  }
}

}  // namespace

DriverResult RunSchedule(const tcp::endpoint& server, const std::vector<double>& arrivals_s,
                         const BodyMaker& make_body, const DriverOptions& options) {
  asio::io_context io(1);
  Run run(io, server, arrivals_s, make_body, options);
  asio::co_spawn(io, Dispatch(run), asio::detached);
  if (options.on_progress && !arrivals_s.empty()) asio::co_spawn(io, Progress(run), asio::detached);
  io.run();
  run.result.wall_s = std::chrono::duration<double>(run.last_end - run.start).count();
  return std::move(run.result);
}

}  // namespace kvtier::serve_bench
