// An LlmEngine whose KV blocks are kvtierd's (DaemonKvBlocks): what `kvtier serve --daemon` and
// `kvtier generate --daemon` run, and what the end-to-end benchmark measures.
//
//   CPU backend  attends in the client's mapping of T1 (fp32 slots; kvtierd's --t1.slot_bytes must
//                be the engine's block bytes).
//   GPU backend  attends in this process's mapping of T0 (the model's dtype; --t0.slot_bytes must
//                be the block bytes), publishes blocks hashed on the GPU, and leases prefixes in
//                T0 (the daemon promotes T1/T2 hits into T0 first).
//
// The client's namespace is the model's name, its KV dtype and block_tokens, so two engines share
// blocks exactly when they run the same model at the same block size.
//
// Lifetime: DaemonKv holds the connection and (GPU) the T0 mapping the engine's pool points into;
// it must outlive the engine. Thread-safety: neither is thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "client/kvtier_client.h"
#include "common/status.h"
#include "engine/cpu_model.h"
#include "engine/daemon_kv_blocks.h"
#include "engine/gpu_model.h"
#include "engine/llm_engine.h"

namespace kvtier::engine {

struct DaemonEngineOptions {
  std::string socket_path;  // kvtierd's control socket
  std::string client_name = "kvtier-engine";
  int64_t block_tokens = 16;
  EngineOptions engine;
  // Promote prefixes found below the engine's tier on a second connection and thread
  // (PrefixLoader), so the running sequences decode meanwhile; false: inline, in the step.
  bool background_loads = true;
  // DaemonKvBlocksOptions::lowest_prefix_tier: blocks found only below it are computed.
  Tier lowest_prefix_tier = Tier::kT3;
};

class DaemonKv {
 public:
  virtual ~DaemonKv() = default;
  virtual client::Client& client() = 0;
  virtual Tier tier() const = 0;  // the tier the engine attends in
};

struct DaemonEngine {
  std::unique_ptr<DaemonKv> kv;  // declared first: destroyed after the engine
  std::unique_ptr<LlmEngine> engine;
  DaemonKvBlocks* blocks = nullptr;  // the engine's, for its stats
};

// Exactly one of `cpu` and `gpu` is non-null and outlives the result. Errors name the socket and
// what does not fit (a daemon without T0 for a GPU model, slot sizes, a connection refused).
absl::StatusOr<DaemonEngine> CreateDaemonEngine(CpuModel* cpu, GpuModel* gpu,
                                                const DaemonEngineOptions& options);

}  // namespace kvtier::engine
