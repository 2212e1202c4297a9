#include "tools/stat/stat_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "client/kvtier_client.h"
#include "tools/stat/stat_view.h"

namespace kvtier::stat {
namespace {

struct StatFlags {
  std::string metrics = "127.0.0.1:9464";  // the default config's metrics.listen_address
  std::string socket;
  std::string pool;  // --socket: the memory pool to connect to
  double interval_s = 1;
  double watch_s = 0;
  bool once = false;
};

void AddFlags(CLI::App* cmd, StatFlags* f) {
  cmd->add_option("--metrics", f->metrics,
                  "kvtierd's metrics endpoint: host:port or http://host:port/path; empty: skip")
      ->capture_default_str();
  cmd->add_option("--socket", f->socket, "Also ask kvtierd's socket for its Stats (a client)");
  cmd->add_option("--pool", f->pool,
                  "With --socket: the memory pool whose Stats to ask for; empty: the only one "
                  "this user may use");
  cmd->add_option("--interval", f->interval_s,
                  "Seconds between the two scrapes that rates come from; 0: one scrape, no rates")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("-w,--watch", f->watch_s, "Refresh every SECONDS until interrupted")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--once", f->once, "One screen and exit, never clearing the terminal (scripts)");
}

absl::StatusOr<protocol::StatsWire> SocketStats(const std::string& path, const std::string& pool) {
  client::ClientOptions options;
  options.socket_path = path;
  options.pool = pool;
  options.ns.model_id = "kvtier-stat";
  options.client_name = "kvtier-stat";
  options.timeout_ms = 5000;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, client::Client::Connect(options));
  return c->Stats();
}

// Fills in.now (and in.stats) from the daemon.
absl::Status Sample(const StatFlags& f, const std::optional<MetricsUrl>& url, StatInput* in) {
  if (url) {
    KVTIER_ASSIGN_OR_RETURN(std::string text, FetchMetrics(*url));
    in->now = MetricsSample(text);
  }
  if (!f.socket.empty()) {
    KVTIER_ASSIGN_OR_RETURN(in->stats, SocketStats(f.socket, f.pool));
  }
  return absl::OkStatus();
}

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

int Fail(const absl::Status& status, int code) {
  std::fprintf(stderr, "kvtier stat: %s\n", std::string(status.message()).c_str());
  return code;
}

int Run(const StatFlags& f) {
  if (f.metrics.empty() && f.socket.empty()) {
    return Fail(absl::InvalidArgumentError("nothing to read: give --metrics or --socket"), 2);
  }
  std::optional<MetricsUrl> url;
  if (!f.metrics.empty()) {
    absl::StatusOr<MetricsUrl> parsed = ParseMetricsUrl(f.metrics);
    if (!parsed.ok()) return Fail(parsed.status(), 2);
    url = *parsed;
  }
  StatInput in;
  in.source = url ? url->ToString() : "";
  in.socket_path = f.socket;
  const bool watch = f.watch_s > 0 && !f.once;
  const double gap = watch ? f.watch_s : f.interval_s;
  if (absl::Status s = Sample(f, url, &in); !s.ok()) return Fail(s, 1);
  const bool clear = watch && ::isatty(STDOUT_FILENO);
  auto sampled = std::chrono::steady_clock::now();
  do {
    if (gap > 0) {
      Sleep(gap);
      in.before = in.now;
      if (absl::Status s = Sample(f, url, &in); !s.ok()) return Fail(s, 1);
      const auto now = std::chrono::steady_clock::now();
      in.interval_s = std::chrono::duration<double>(now - sampled).count();  // scrapes take time
      sampled = now;
    }
    std::fputs(((clear ? "\x1b[H\x1b[2J" : "") + FormatStatScreen(in)).c_str(), stdout);
    std::fflush(stdout);
  } while (watch);
  return 0;
}

}  // namespace

void RegisterStatCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "stat", "One screen on a running kvtierd: tiers, occupancy, hit ratios, rates (--watch)");
  auto flags = std::make_shared<StatFlags>();
  AddFlags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace kvtier::stat
