// GPU variant of kernels/gpu_checksum.h: argument checks, descriptors through a DescriptorRing,
// one launch per call.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "kernels/descriptor_ring.h"
#include "kernels/gpu_checksum.h"
#include "kernels/gpu_checksum_launch.h"
#include "kernels/launch_status.h"

namespace kvtier {
namespace {

constexpr unsigned kThreads = 256;  // a multiple of 8 and of every vendor's warp size
constexpr unsigned kBlocksPerMultiprocessor = 4;

constexpr size_t kMaxItems = size_t{1} << 24;  // per call; keeps every count in 32 bits

absl::Status CheckCount(size_t n) {
  if (n <= kMaxItems) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("GPU checksum: {} items in one call (at most {})", n, kMaxItems));
}

absl::Status CheckPagedArgs(const PagedKvCache& cache, std::span<const int32_t> engine_blocks) {
  KVTIER_RETURN_IF_ERROR(CheckChecksumLayout(cache));
  KVTIER_RETURN_IF_ERROR(CheckCount(engine_blocks.size()));
  for (size_t i = 0; i < engine_blocks.size(); ++i) {
    if (engine_blocks[i] < 0) {
      return absl::InvalidArgumentError(
          fmt::format("GPU checksum: engine_blocks[{}] is negative ({})", i, engine_blocks[i]));
    }
  }
  return absl::OkStatus();
}

class GpuChecksummerImpl final : public GpuChecksummer {
 public:
  explicit GpuChecksummerImpl(unsigned max_grid) : max_grid_(max_grid) {}

  absl::Status Reserve(size_t launches, size_t bytes) {
    return descriptors_.Reserve(launches, bytes);
  }

  absl::Status Payloads(std::span<const void* const> payloads, std::span<const uint32_t> bytes,
                        uint64_t* out, gpu::StreamHandle stream) override {
    if (payloads.size() != bytes.size()) {
      return absl::InvalidArgumentError(
          fmt::format("GPU checksum: {} payloads but {} lengths", payloads.size(), bytes.size()));
    }
    KVTIER_RETURN_IF_ERROR(CheckCount(payloads.size()));
    for (size_t i = 0; i < payloads.size(); ++i) {
      if (payloads[i] == nullptr && bytes[i] > 0) {
        return absl::InvalidArgumentError(fmt::format("GPU checksum: payloads[{}] is null", i));
      }
    }
    if (payloads.empty()) return absl::OkStatus();
    const size_t words = payloads.size() * 2;
    KVTIER_ASSIGN_OR_RETURN(void* staging, descriptors_.Acquire(words * sizeof(uint64_t)));
    auto* items = static_cast<uint64_t*>(staging);
    for (size_t i = 0; i < payloads.size(); ++i) {
      items[2 * i] = reinterpret_cast<uintptr_t>(payloads[i]);
      items[2 * i + 1] = bytes[i];
    }
    ChecksumParams p;
    p.count = static_cast<uint32_t>(payloads.size());
    return Launch(p, words * sizeof(uint64_t), out, stream);
  }

  absl::Status CacheBlocks(const PagedKvCache& cache, std::span<const int32_t> engine_blocks,
                           uint64_t* out, gpu::StreamHandle stream) override {
    KVTIER_RETURN_IF_ERROR(CheckPagedArgs(cache, engine_blocks));
    if (engine_blocks.empty()) return absl::OkStatus();
    const size_t layer_words = size_t{cache.num_layers()} * 2;
    const size_t bytes = (engine_blocks.size() + layer_words) * sizeof(uint64_t);
    KVTIER_ASSIGN_OR_RETURN(void* staging, descriptors_.Acquire(bytes));
    auto* items = static_cast<uint64_t*>(staging);  // items first, then the layer bases
    for (size_t i = 0; i < engine_blocks.size(); ++i) {
      items[i] = static_cast<uint64_t>(engine_blocks[i]);
    }
    uint64_t* bases = items + engine_blocks.size();
    for (uint32_t l = 0; l < cache.num_layers(); ++l) {
      bases[2 * l] = reinterpret_cast<uintptr_t>(cache.layers[l].k);
      bases[2 * l + 1] = reinterpret_cast<uintptr_t>(cache.layers[l].v);
    }
    ChecksumParams p;
    p.count = static_cast<uint32_t>(engine_blocks.size());
    p.num_layers = cache.num_layers();
    p.kv_heads = cache.kv_heads;
    p.row_bytes = static_cast<uint32_t>(cache.row_bytes());
    p.piece_bytes = static_cast<uint32_t>(cache.piece_bytes());
    p.payload_bytes = static_cast<uint32_t>(cache.payload_bytes());
    p.block_stride = cache.block_stride;
    p.token_stride = cache.token_stride;
    p.head_stride = cache.head_stride;
    p.pieces_contiguous = cache.pieces_contiguous();
    p.layer_bases = static_cast<const uint64_t*>(descriptors_.device()) + engine_blocks.size();
    return Launch(p, bytes, out, stream);
  }

 private:
  // Uploads the acquired descriptors, launches, and retires them after the launch.
  absl::Status Launch(ChecksumParams& p, size_t descriptor_bytes, uint64_t* out,
                      gpu::StreamHandle stream) {
    KVTIER_RETURN_IF_ERROR(descriptors_.Upload(descriptor_bytes, stream));
    p.items = static_cast<const uint64_t*>(descriptors_.device());
    p.out = out;
    const unsigned grid = std::min<unsigned>(p.count, max_grid_);
    const absl::Status launched = gpu::StatusFromVendorCode(
        LaunchChecksum(p, grid, kThreads, stream), "GPU checksum kernel launch");
    KVTIER_RETURN_IF_ERROR(descriptors_.Retire(stream));  // even after a failed launch
    return launched;
  }

  const unsigned max_grid_;
  gpu::DescriptorRing descriptors_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuChecksummer>> GpuChecksummer::Create() {
  KVTIER_ASSIGN_OR_RETURN(const int device, gpu::CurrentDevice());
  KVTIER_ASSIGN_OR_RETURN(const gpu::DeviceInfo info, gpu::GetDeviceInfo(device));
  const unsigned grid = kBlocksPerMultiprocessor * static_cast<unsigned>(info.multiprocessors);
  auto checksummer = std::make_unique<GpuChecksummerImpl>(grid);
  // The first put's costs, paid here: the kernel's code, and descriptor buffers for 512 blocks.
  KVTIER_RETURN_IF_ERROR(
      gpu::StatusFromVendorCode(PreloadChecksumKernel(), "loading the GPU checksum kernel"));
  KVTIER_RETURN_IF_ERROR(checksummer->Reserve(2, 8192));
  return checksummer;
}

}  // namespace kvtier
