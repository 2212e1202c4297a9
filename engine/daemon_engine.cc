#include "engine/daemon_engine.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "client/gpu_client.h"
#include "engine/cpu_backend.h"
#include "engine/gpu_backend.h"
#include "kernels/gpu_checksum.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::engine {
namespace {

constexpr size_t kMaxSums = 1024;  // a publish's items at most (the protocol's max batch)

class CpuDaemonKv final : public DaemonKv {
 public:
  explicit CpuDaemonKv(std::unique_ptr<client::Client> c) : client_(std::move(c)) {}
  client::Client& client() override { return *client_; }
  Tier tier() const override { return Tier::kT1; }

 private:
  std::unique_ptr<client::Client> client_;
};

// The T0 mapping (GpuClient), the GPU hasher and its pinned output: what a T0 engine's pool and
// publishes need. Destroyed after the engine (DaemonEngine's order).
class GpuDaemonKv final : public DaemonKv {
 public:
  ~GpuDaemonKv() override {
    (void)stream_.Synchronize();
    if (sums_ != nullptr) (void)gpu::PinnedFree(sums_);
  }
  client::Client& client() override { return *client_; }
  Tier tier() const override { return Tier::kT0; }

  absl::Status Init(std::unique_ptr<client::Client> c) {
    client_ = std::move(c);
    client::GpuClientOptions o;
    KVTIER_ASSIGN_OR_RETURN(o.device, gpu::CurrentDevice());
    KVTIER_ASSIGN_OR_RETURN(gpu_client_, client::GpuClient::Create(client_.get(), o));
    if (!gpu_client_->t0_mapped()) {
      return absl::FailedPreconditionError(
          "the GPU backend attends in kvtierd's T0, and this daemon has no T0 on this GPU (start "
          "it with --t0.capacity_bytes, on the engine's GPU)");
    }
    KVTIER_ASSIGN_OR_RETURN(checksummer_, GpuChecksummer::Create());
    KVTIER_ASSIGN_OR_RETURN(stream_, gpu::Stream::Create());
    KVTIER_ASSIGN_OR_RETURN(void* p, gpu::PinnedAlloc(kMaxSums * sizeof(uint64_t)));
    sums_ = static_cast<uint64_t*>(p);
    KVTIER_ASSIGN_OR_RETURN(sums_device_, gpu::DevicePointerOf(p));
    return absl::OkStatus();
  }

  std::byte* Base() const { return gpu_client_->T0SlotData(0); }

  // XXH3-64 of whole T0 slots, on the GPU, in batches of kMaxSums.
  absl::Status Checksums(std::span<const uint32_t> slots, std::span<uint64_t> sums) {
    const uint32_t slot_bytes = client_->t0()->slot_bytes;
    for (size_t at = 0; at < slots.size(); at += kMaxSums) {
      const size_t n = std::min(kMaxSums, slots.size() - at);
      std::vector<const void*> payloads(n);
      std::vector<uint32_t> bytes(n, slot_bytes);
      for (size_t i = 0; i < n; ++i) {
        payloads[i] = gpu_client_->T0SlotData(slots[at + i]);
        if (payloads[i] == nullptr) {
          return absl::InternalError(fmt::format("T0 has no slot {}", slots[at + i]));
        }
      }
      KVTIER_RETURN_IF_ERROR(checksummer_->Payloads(
          payloads, bytes, static_cast<uint64_t*>(sums_device_), stream_.handle()));
      KVTIER_RETURN_IF_ERROR(stream_.Synchronize());
      std::copy(sums_, sums_ + n, sums.begin() + static_cast<ptrdiff_t>(at));
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::GpuClient> gpu_client_;  // after client_: destroyed before it
  std::unique_ptr<GpuChecksummer> checksummer_;
  gpu::Stream stream_;
  uint64_t* sums_ = nullptr;
  void* sums_device_ = nullptr;
};

absl::StatusOr<std::unique_ptr<client::Client>> Connect(const DaemonEngineOptions& o,
                                                        const std::string& model_id,
                                                        const std::string& dtype) {
  client::ClientOptions co;
  co.socket_path = o.socket_path;
  co.client_name = o.client_name;
  co.ns.model_id = model_id;
  co.ns.dtype = dtype;
  co.ns.block_tokens = static_cast<uint32_t>(o.block_tokens);
  absl::StatusOr<std::unique_ptr<client::Client>> c = client::Client::Connect(co);
  if (!c.ok()) {
    return absl::Status(c.status().code(), fmt::format("kvtierd at {}: {}", o.socket_path,
                                                       std::string(c.status().message())));
  }
  return c;
}

// Gives `blocks` a PrefixLoader on a connection of its own (options.background_loads).
absl::Status AddLoader(DaemonKvBlocks& blocks, Tier tier, const DaemonEngineOptions& o,
                       const std::string& model_id, const std::string& dtype) {
  if (!o.background_loads) return absl::OkStatus();
  DaemonEngineOptions lo = o;
  lo.client_name += "-loader";
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c, Connect(lo, model_id, dtype));
  blocks.SetLoader(std::make_unique<PrefixLoader>(std::move(c), tier));
  return absl::OkStatus();
}

absl::StatusOr<DaemonEngine> CreateOnCpu(CpuModel& model, const DaemonEngineOptions& o) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c,
                          Connect(o, model.config().name, "fp32"));
  DaemonEngine out;
  out.kv = std::make_unique<CpuDaemonKv>(std::move(c));
  client::Client* client = &out.kv->client();
  const ops::PagedKvGeometry geometry = model.KvGeometry(o.block_tokens);
  DaemonKvBlocksOptions bo;
  bo.lowest_prefix_tier = o.lowest_prefix_tier;
  KVTIER_ASSIGN_OR_RETURN(
      std::unique_ptr<DaemonKvBlocks> blocks,
      DaemonKvBlocks::Create(client, o.block_tokens,
                             static_cast<uint64_t>(geometry.slot_elems()) * sizeof(float), bo));
  KVTIER_RETURN_IF_ERROR(AddLoader(*blocks, Tier::kT1, o, model.config().name, "fp32"));
  KVTIER_ASSIGN_OR_RETURN(CpuKvPool pool, DaemonKvBlocks::CpuPool(client, geometry));
  out.blocks = blocks.get();
  KVTIER_ASSIGN_OR_RETURN(out.engine,
                          LlmEngine::Create(std::make_unique<CpuBackend>(model, std::move(pool)),
                                            std::move(blocks), o.engine));
  return out;
}

absl::StatusOr<DaemonEngine> CreateOnGpu(GpuModel& model, const DaemonEngineOptions& o) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> c,
                          Connect(o, model.config().name, ops::gpu::DTypeName(model.dtype())));
  auto kv = std::make_unique<GpuDaemonKv>();
  KVTIER_RETURN_IF_ERROR(kv->Init(std::move(c)));
  const ops::PagedKvGeometry geometry = model.KvGeometry(o.block_tokens);
  const uint64_t slot_bytes = static_cast<uint64_t>(geometry.slot_elems()) * 2;
  DaemonKvBlocksOptions bo;
  bo.tier = Tier::kT0;
  bo.lowest_prefix_tier = o.lowest_prefix_tier;
  GpuDaemonKv* raw = kv.get();
  bo.checksum = [raw](std::span<const uint32_t> slots, std::span<uint64_t> sums) {
    return raw->Checksums(slots, sums);
  };
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<DaemonKvBlocks> blocks,
                          DaemonKvBlocks::Create(&kv->client(), o.block_tokens, slot_bytes, bo));
  KVTIER_RETURN_IF_ERROR(
      AddLoader(*blocks, Tier::kT0, o, model.config().name, ops::gpu::DTypeName(model.dtype())));
  KVTIER_ASSIGN_OR_RETURN(
      std::unique_ptr<GpuKvPool> pool,
      GpuKvPool::View(geometry, blocks->num_slots(), model.dtype(), raw->Base()));
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<GpuBackend> backend,
                          GpuBackend::Create(model, std::move(pool)));
  DaemonEngine out;
  out.kv = std::move(kv);
  out.blocks = blocks.get();
  KVTIER_ASSIGN_OR_RETURN(out.engine,
                          LlmEngine::Create(std::move(backend), std::move(blocks), o.engine));
  return out;
}

}  // namespace

absl::StatusOr<DaemonEngine> CreateDaemonEngine(CpuModel* cpu, GpuModel* gpu,
                                                const DaemonEngineOptions& options) {
  if ((cpu == nullptr) == (gpu == nullptr)) {
    return absl::InvalidArgumentError(
        "CreateDaemonEngine: give exactly one of a CPU and a GPU model");
  }
  if (options.block_tokens < 1) {
    return absl::InvalidArgumentError(
        fmt::format("engine KV in kvtierd: block_tokens {} < 1", options.block_tokens));
  }
  return cpu != nullptr ? CreateOnCpu(*cpu, options) : CreateOnGpu(*gpu, options);
}

}  // namespace kvtier::engine
