// kvtierd: parses the command line, loads and validates the config, starts the daemon (daemon.h)
// and serves until SIGTERM/SIGINT. Exit codes: 0 a clean stop (or a good --check-config), 1 a
// failure to start or run, 2 a bad command line or config.
#include <cstdio>
#include <string>
#include <vector>

#include "common/log.h"
#include "daemon/cli.h"
#include "daemon/config.h"
#include "daemon/config_schema.h"
#include "daemon/daemon.h"
#include "daemon/log_file.h"

namespace kvtier {
namespace {

constexpr int kStartFailed = 1;
constexpr int kBadConfig = 2;

int Fail(const absl::Status& status, int code) {
  std::fprintf(stderr, "kvtierd: %s\n", std::string(status.message()).c_str());
  return code;
}

void LogConfig(const std::string& path, const DaemonConfig& config) {
  const std::string t0 = !config.t0_enabled ? "off"
                         : config.tiers.t0->capacity_bytes != 0
                             ? fmt::format("{} bytes on GPU {}", config.tiers.t0->capacity_bytes,
                                           config.tiers.t0->device)
                             : fmt::format("{} of GPU {}'s free memory",
                                           config.tiers.t0->free_fraction, config.tiers.t0->device);
  KVTIER_LOG(kInfo, "daemon", "config {}: T0 {}, T1 {} bytes, T2 {}, socket {}, metrics {}",
             path.empty() ? "(defaults)" : path, t0, config.tiers.t1.capacity_bytes,
             config.t2_enabled
                 ? fmt::format("{} bytes x {} directories", config.tiers.t2->capacity_bytes,
                               config.ManagerOptions().t2->directories.size())
                 : "off",
             config.SocketPath(), config.metrics.enabled ? config.metrics.listen_address : "off");
  if (!config.pools.empty()) {
    std::vector<std::string> pools;
    for (const PoolPlan& plan : config.PoolPlans()) {
      pools.push_back(fmt::format("'{}' (T1 {} bytes)", plan.name, plan.tiers.t1.capacity_bytes));
    }
    KVTIER_LOG(kInfo, "daemon", "{} memory pools: {}", pools.size(), fmt::join(pools, ", "));
  }
  for (const ConfigKey& key : ConfigKeys()) {
    KVTIER_LOG(kDebug, "daemon", "config {} = {}", key.name, key.get(config));
  }
}

int Main(int argc, char** argv) {
  KvtierdArgs args;
  if (std::optional<int> code = ParseKvtierdArgs(argc, argv, &args)) return *code;
  if (args.help_config_markdown) {
    std::fputs(ConfigMarkdown().c_str(), stdout);
    return 0;
  }
  absl::StatusOr<DaemonConfig> config = LoadConfig(args.config_path, args.overrides);
  if (!config.ok()) return Fail(config.status(), kBadConfig);
  if (args.print_config) {
    std::fputs(PrintConfig(*config).c_str(), stdout);
    return 0;
  }
  log::SetLevel(config->daemon.log_level);
  if (!config->daemon.log_file.empty()) {
    if (absl::Status s = RedirectStderrTo(config->daemon.log_file); !s.ok()) {
      return Fail(LocateError(*config, s), kBadConfig);
    }
  }
  LogConfig(args.config_path, *config);
  if (absl::Status s = PrepareDirectories(*config); !s.ok()) return Fail(s, kBadConfig);
  if (args.check_config) {
    KVTIER_LOG(kInfo, "daemon", "config is valid");
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(*config);
  if (!daemon.ok()) return Fail(LocateError(*config, daemon.status()), kStartFailed);
  (*daemon)->RunUntilSignalled();
  daemon->reset();
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Main(argc, argv); }
