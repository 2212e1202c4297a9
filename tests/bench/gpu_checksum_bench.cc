// XXH3-64 on the GPU (kernels/gpu_checksum.h), next to ceilings measured in the same run:
//
//   HBM read   a device-to-device copy of the same bytes, counted as bytes read (the copy also
//              writes them, so this is a floor of the read bandwidth, not its peak)
//   D2H        one large pinned device-to-host copy: what a put of the same bytes costs anyway
//   CPU        PayloadChecksum (the host's fastest XXH3) of the same bytes on one core
//
// Hashed: N payloads of S bytes in device memory (contiguous, a T0 slot's shape) and the same
// bytes as engine blocks of a vLLM-layout paged cache (Llama-3-8B shape: 32 layers, 8 KV heads,
// head_dim 128, bf16, 16-token blocks: 2 MiB payloads) hashed in place. Best of --repeat, GPU
// event times.
//
//   kvtier_gpu_checksum_bench [--blocks N] [--repeat R]      (defaults: 512 blocks = 1 GiB, 5)
// Without a usable GPU it prints why and exits 0.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "kernels/gpu_checksum.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_layout.h"
#include "tests/bench/gpu_bench_util.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

constexpr uint32_t kLayers = 32, kHeads = 8, kHeadDim = 128, kElem = 2, kBlockTokens = 16;

constexpr char kProgram[] = "gpu_checksum_bench";
void Check(const absl::Status& s, const char* what) { bench::Check(kProgram, s, what); }
template <typename T>
T Take(absl::StatusOr<T> v, const char* what) {
  return bench::Take(kProgram, std::move(v), what);
}

double BestSeconds(int repeat, gpu::StreamHandle stream, const std::function<void()>& enqueue) {
  return bench::BestSeconds(kProgram, repeat, stream, enqueue);
}

struct Row {
  std::string what;
  double seconds;
  double bytes;
};

void Print(const std::vector<Row>& rows) {
  std::printf("| what | ms | GB/s |\n| --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.2f | %.1f |\n", r.what.c_str(), r.seconds * 1e3,
                r.bytes / r.seconds / 1e9);
  }
}

int Run(uint32_t blocks, int repeat) {
  Check(gpu::SetDevice(0), "device");
  const size_t payload = size_t{kLayers} * 2 * kBlockTokens * kHeads * kHeadDim * kElem;
  const size_t bytes = payload * blocks;
  void* dev = Take(gpu::DeviceAlloc(bytes), "device payloads");
  void* dev2 = Take(gpu::DeviceAlloc(bytes), "device copy target");
  void* host = Take(gpu::PinnedAlloc(bytes), "pinned");
  auto* out = static_cast<uint64_t*>(Take(gpu::DeviceAlloc(blocks * sizeof(uint64_t)), "out"));
  gpu::Stream stream = Take(gpu::Stream::Create(), "stream");
  Check(FillPattern(dev, bytes, 7, stream.handle()), "fill");
  auto checksummer = Take(GpuChecksummer::Create(), "checksummer");

  std::vector<const void*> ptrs(blocks);
  std::vector<uint32_t> lens(blocks, static_cast<uint32_t>(payload));
  for (uint32_t i = 0; i < blocks; ++i) ptrs[i] = static_cast<char*>(dev) + i * payload;
  // The same memory as a vLLM-layout cache of `blocks` engine blocks.
  const size_t layer_bytes = bytes / kLayers;
  std::vector<void*> bases(kLayers);
  for (uint32_t l = 0; l < kLayers; ++l) bases[l] = static_cast<char*>(dev) + l * layer_bytes;
  const PagedKvCache cache = VllmLayout(bases, blocks, kBlockTokens, kHeads, kHeadDim, kElem);
  std::vector<int32_t> ids(blocks);
  for (uint32_t i = 0; i < blocks; ++i) ids[i] = static_cast<int32_t>(i);

  const auto h = stream.handle();
  std::vector<Row> rows;
  rows.push_back(
      {"GPU XXH3-64, contiguous payloads",
       BestSeconds(repeat, h, [&] { Check(checksummer->Payloads(ptrs, lens, out, h), "hash"); }),
       double(bytes)});
  rows.push_back(
      {"GPU XXH3-64, paged cache blocks in place (vLLM)",
       BestSeconds(repeat, h,
                   [&] { Check(checksummer->CacheBlocks(cache, ids, out, h), "hash paged"); }),
       double(bytes)});
  rows.push_back(
      {"ceiling: HBM read (D2D copy, bytes read)",
       BestSeconds(repeat, h, [&] { Check(gpu::CopyAsync(dev2, dev, bytes, h), "d2d"); }),
       double(bytes)});
  rows.push_back(
      {"peer: D2H pinned copy of the same bytes (a put's DMA)",
       BestSeconds(repeat, h, [&] { Check(gpu::CopyAsync(host, dev, bytes, h), "d2h"); }),
       double(bytes)});
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sink = 0;
  for (uint32_t i = 0; i < blocks; ++i)
    sink ^= PayloadChecksum(static_cast<char*>(host) + i * payload, payload);
  const double cpu = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rows.push_back({"peer: CPU PayloadChecksum, one core", cpu, double(bytes)});
  std::printf("%u payloads of %.1f MiB (%.2f GiB), best of %d (checksum sink %016llx)\n\n", blocks,
              payload / 1048576.0, bytes / 1073741824.0, repeat,
              static_cast<unsigned long long>(sink));
  Print(rows);
  const double hash_gbs = bytes / rows[0].seconds / 1e9, read_gbs = bytes / rows[2].seconds / 1e9;
  std::printf("\nGPU hash / HBM read ceiling: %.2f; GPU hash time / D2H time: %.3f\n",
              hash_gbs / read_gbs, rows[0].seconds / rows[3].seconds);
  (void)gpu::DeviceFree(dev);
  (void)gpu::DeviceFree(dev2);
  (void)gpu::DeviceFree(out);
  (void)gpu::PinnedFree(host);
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  uint32_t blocks = 512;
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--blocks") {
      blocks = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    } else if (f == "--repeat") {
      repeat = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: kvtier_gpu_checksum_bench [--blocks N] [--repeat R]\n");
      return 2;
    }
  }
  if (blocks == 0 || repeat < 1) {
    std::fprintf(stderr, "gpu_checksum_bench: --blocks and --repeat must be at least 1\n");
    return 2;
  }
  const std::string why = kvtier::gpu::UnavailableReason();
  if (!why.empty()) {
    std::printf("gpu_checksum_bench: needs a GPU (%s); skipped\n", why.c_str());
    return 0;
  }
  return kvtier::Run(blocks, repeat);
}
