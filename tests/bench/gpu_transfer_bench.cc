// GPU transfer speeds (docs/benchmarks.md "GPU transfers"), every figure next to a ceiling measured
// in the same run on the same buffers:
//
//   ceilings   one large copy host->device (H2D) and device->host (D2H) of pinned host memory, and
//              both at once on two streams (total GB/s).
//   DMA        T1->T0 and T0->T1: batches of contiguous payloads (32 KiB, 256 KiB, 512 KiB, 2 MiB)
//              through gpu::CopyBatchAsync ("dma"; cudaMemcpyBatchAsync on CUDA 12.8+) and through
//              one copy call per payload ("dma each"), and both directions at once.
//   paged      T1 <-> an engine's paged KV cache in device memory (vLLM layout, Llama-3-8B shape:
//              32 layers, 8 KV heads, head_dim 128, bf16) with blocks of 8, 16 and 32 tokens
//              (16, 32, 64 KiB pieces), through KvCopier's DMA and kernel paths, both directions.
//
// Host memory is allocated as T1 allocates it: mmap, then gpu::HostRegister (pinned and mapped);
// the kernel path reads and writes it through gpu::DevicePointerOf. Times are GPU-event times of
// the whole batch, best of --repeat after one warm-up.
//
//   kvtier_gpu_transfer_bench [--gib N] [--repeat R]
//   (defaults: 1 GiB per ceiling copy, batches of half that, best of 5; under a minute on an H100)
// Without a usable GPU (the CPU variant, or no device) it prints why and exits 0.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "kernels/kv_copy.h"
#include "kernels/kv_layout.h"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kKiB = 1024;

struct Options {
  double gib = 1;
  int repeat = 5;
};

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--gib N] [--repeat R]\n", argv0);
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  if ((argc - 1) % 2 != 0) Usage(argv[0]);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gib") {
      o.gib = std::strtod(argv[i + 1], nullptr);
    } else if (flag == "--repeat") {
      o.repeat = std::atoi(argv[i + 1]);
    } else {
      Usage(argv[0]);
    }
  }
  if (o.gib <= 0 || o.repeat < 1) Usage(argv[0]);
  return o;
}

// Pinned, mapped host memory allocated as T1 does (mmap + HostRegister).
class HostBuffer {
 public:
  static absl::StatusOr<HostBuffer> Create(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError("mmap of the host buffer failed");
    HostBuffer b;
    b.host_ = p;
    b.bytes_ = bytes;
    KVTIER_RETURN_IF_ERROR(gpu::HostRegister(p, bytes));
    b.registered_ = true;
    KVTIER_ASSIGN_OR_RETURN(b.device_, gpu::DevicePointerOf(p));
    return b;
  }
  HostBuffer() = default;
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(host_, o.host_);
    std::swap(device_, o.device_);
    std::swap(bytes_, o.bytes_);
    std::swap(registered_, o.registered_);
    return *this;
  }
  ~HostBuffer() {
    if (registered_) (void)gpu::HostUnregister(host_);
    if (host_ != nullptr) munmap(host_, bytes_);
  }
  char* device() const { return static_cast<char*>(device_); }  // for copies and kernels

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
};

class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Create(size_t bytes) {
    DeviceBuffer b;
    KVTIER_ASSIGN_OR_RETURN(b.p_, gpu::DeviceAlloc(bytes));
    return b;
  }
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept { std::swap(p_, o.p_); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~DeviceBuffer() { (void)gpu::DeviceFree(p_); }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
};

// Two streams and the events that time work on them, fork and join included.
struct Timer {
  gpu::Stream a, b;
  gpu::Event start, end, fork, join;
  int repeat = 1;

  static absl::StatusOr<Timer> Create(int repeat) {
    Timer t;
    t.repeat = repeat;
    KVTIER_ASSIGN_OR_RETURN(t.a, gpu::Stream::Create());
    KVTIER_ASSIGN_OR_RETURN(t.b, gpu::Stream::Create());
    KVTIER_ASSIGN_OR_RETURN(t.start, gpu::Event::Create(true));
    KVTIER_ASSIGN_OR_RETURN(t.end, gpu::Event::Create(true));
    KVTIER_ASSIGN_OR_RETURN(t.fork, gpu::Event::Create());
    KVTIER_ASSIGN_OR_RETURN(t.join, gpu::Event::Create());
    return t;
  }

  // Best GB/s of `bytes` moved by `on_a` (on stream a) and `on_b` (on stream b, at the same time;
  // may be empty), over one warm-up and `repeat` timed runs.
  using Work = std::function<absl::Status(gpu::StreamHandle)>;
  absl::StatusOr<double> BestGbps(double bytes, const Work& on_a, const Work& on_b = {}) {
    double best = 0;
    for (int r = 0; r <= repeat; ++r) {
      KVTIER_RETURN_IF_ERROR(start.Record(a.handle()));
      if (on_b) {
        KVTIER_RETURN_IF_ERROR(fork.Record(a.handle()));
        KVTIER_RETURN_IF_ERROR(gpu::StreamWaitEvent(b.handle(), fork));
        KVTIER_RETURN_IF_ERROR(on_b(b.handle()));
        KVTIER_RETURN_IF_ERROR(join.Record(b.handle()));
      }
      KVTIER_RETURN_IF_ERROR(on_a(a.handle()));
      if (on_b) KVTIER_RETURN_IF_ERROR(gpu::StreamWaitEvent(a.handle(), join));
      KVTIER_RETURN_IF_ERROR(end.Record(a.handle()));
      KVTIER_RETURN_IF_ERROR(end.Synchronize());
      KVTIER_ASSIGN_OR_RETURN(const float ms, gpu::Event::ElapsedMs(start, end));
      if (r > 0) best = std::max(best, bytes / (ms * 1e-3) / 1e9);
    }
    return best;
  }
};

// One line of the final table.
struct Row {
  std::string transfer, size, path;
  double gbps = 0, ceiling = 0;
};

struct Ceilings {
  double h2d = 0, d2h = 0, both = 0;
};

struct Bench {
  Options options;
  size_t big = 0;    // bytes of each ceiling copy
  size_t batch = 0;  // bytes of each batch
  HostBuffer host[2];
  DeviceBuffer dev[2];
  Timer timer;
  Ceilings ceil;
  std::vector<Row> rows;

  void Add(std::string transfer, std::string size, std::string path, double gbps, double ceiling) {
    std::printf("%-28s %-26s %-8s %7.1f GB/s  %5.1f%% of %.1f\n", transfer.c_str(), size.c_str(),
                path.c_str(), gbps, 100 * gbps / ceiling, ceiling);
    std::fflush(stdout);
    rows.push_back({std::move(transfer), std::move(size), std::move(path), gbps, ceiling});
  }
};

gpu::CopyOp Op(void* dst, const void* src, size_t bytes) { return gpu::CopyOp{dst, src, bytes}; }

absl::Status MeasureCeilings(Bench& b) {
  char* h0 = b.host[0].device();
  char* h1 = b.host[1].device();
  char* d0 = b.dev[0].get();
  char* d1 = b.dev[1].get();
  const size_t n = b.big;
  auto h2d = [&](gpu::StreamHandle s) { return gpu::CopyAsync(d0, h0, n, s); };
  auto d2h = [&](gpu::StreamHandle s) { return gpu::CopyAsync(h1, d1, n, s); };
  KVTIER_ASSIGN_OR_RETURN(b.ceil.h2d, b.timer.BestGbps(n, h2d));
  KVTIER_ASSIGN_OR_RETURN(b.ceil.d2h, b.timer.BestGbps(n, d2h));
  KVTIER_ASSIGN_OR_RETURN(b.ceil.both, b.timer.BestGbps(2.0 * n, h2d, d2h));
  const std::string size = std::to_string(n >> 20) + " MiB, one copy";
  b.Add("ceiling H2D", size, "dma", b.ceil.h2d, b.ceil.h2d);
  b.Add("ceiling D2H", size, "dma", b.ceil.d2h, b.ceil.d2h);
  b.Add("ceiling both at once", size + " each", "dma", b.ceil.both, b.ceil.both);
  return absl::OkStatus();
}

// The baseline CopyBatchAsync is measured against: one cudaMemcpyAsync call per op.
absl::Status CopyEach(const std::vector<gpu::CopyOp>& ops, gpu::StreamHandle s) {
  for (const gpu::CopyOp& op : ops)
    KVTIER_RETURN_IF_ERROR(gpu::CopyAsync(op.dst, op.src, op.bytes, s));
  return absl::OkStatus();
}

// Batches of `payload`-byte copies: payload i of T1 buffer 0 to device slot i, and device buffer
// 1 to T1 buffer 1 (as T1->T0 and T0->T1 move whole payloads); through gpu::CopyBatchAsync
// ("dma") and, one way at a time, through one copy call per payload ("dma each").
absl::Status MeasureDmaBatches(Bench& b, size_t payload) {
  std::vector<gpu::CopyOp> up, down;
  for (size_t off = 0; off + payload <= b.batch; off += payload) {
    up.push_back(Op(b.dev[0].get() + off, b.host[0].device() + off, payload));
    down.push_back(Op(b.host[1].device() + off, b.dev[1].get() + off, payload));
  }
  const double bytes = static_cast<double>(up.size() * payload);
  auto h2d = [&](gpu::StreamHandle s) { return gpu::CopyBatchAsync(up, s); };
  auto d2h = [&](gpu::StreamHandle s) { return gpu::CopyBatchAsync(down, s); };
  auto h2d_each = [&](gpu::StreamHandle s) { return CopyEach(up, s); };
  auto d2h_each = [&](gpu::StreamHandle s) { return CopyEach(down, s); };
  const std::string size =
      std::to_string(payload / kKiB) + " KiB payloads x " + std::to_string(up.size());
  KVTIER_ASSIGN_OR_RETURN(double gbps, b.timer.BestGbps(bytes, h2d_each));
  b.Add("T1->T0 contiguous", size, "dma each", gbps, b.ceil.h2d);
  KVTIER_ASSIGN_OR_RETURN(gbps, b.timer.BestGbps(bytes, h2d));
  b.Add("T1->T0 contiguous", size, "dma", gbps, b.ceil.h2d);
  KVTIER_ASSIGN_OR_RETURN(gbps, b.timer.BestGbps(bytes, d2h_each));
  b.Add("T0->T1 contiguous", size, "dma each", gbps, b.ceil.d2h);
  KVTIER_ASSIGN_OR_RETURN(gbps, b.timer.BestGbps(bytes, d2h));
  b.Add("T0->T1 contiguous", size, "dma", gbps, b.ceil.d2h);
  KVTIER_ASSIGN_OR_RETURN(gbps, b.timer.BestGbps(2 * bytes, h2d, d2h));
  b.Add("T1<->T0 both at once", size, "dma", gbps, b.ceil.both);
  return absl::OkStatus();
}

// T1 payloads <-> a vLLM-layout engine cache in device memory (Llama-3-8B shape), `block_tokens`
// per block; the batch's engine blocks are every other block of a cache twice the batch's size.
absl::Status MeasurePaged(Bench& b, KvCopier& copier, uint32_t block_tokens) {
  constexpr uint32_t kLayers = 32, kHeads = 8, kDim = 128, kElem = 2;
  const size_t payload = size_t{kLayers} * 2 * block_tokens * kHeads * kDim * kElem;
  const uint32_t blocks = static_cast<uint32_t>(b.batch / payload);
  const uint32_t cache_blocks = 2 * blocks;
  const size_t layer_bytes = size_t{cache_blocks} * payload / kLayers;  // 2 x blocks x piece
  if (layer_bytes * kLayers > b.big) return absl::InternalError("paged cache exceeds dev[0]");
  std::vector<void*> bases;
  for (uint32_t l = 0; l < kLayers; ++l) bases.push_back(b.dev[0].get() + l * layer_bytes);
  const PagedKvCache cache = VllmLayout(bases, cache_blocks, block_tokens, kHeads, kDim, kElem);
  std::vector<int32_t> ids;
  std::vector<void*> payloads;
  for (uint32_t i = 0; i < blocks; ++i) {
    ids.push_back(static_cast<int32_t>((i * 2 + 1) % cache_blocks));
    payloads.push_back(b.host[0].device() + size_t{i} * payload);
  }
  const double bytes = static_cast<double>(blocks) * payload;
  const std::string size = std::to_string(cache.piece_bytes() / kKiB) + " KiB pieces, " +
                           std::to_string(blocks) + " blocks";
  for (KvCopyPath path : {KvCopyPath::kDma, KvCopyPath::kKernel}) {
    for (KvCopyDirection dir :
         {KvCopyDirection::kPayloadToCache, KvCopyDirection::kCacheToPayload}) {
      auto work = [&](gpu::StreamHandle s) {
        return copier.Copy(cache, dir, ids, payloads, path, s);
      };
      KVTIER_ASSIGN_OR_RETURN(const double gbps, b.timer.BestGbps(bytes, work));
      const bool in = dir == KvCopyDirection::kPayloadToCache;
      b.Add(in ? "T1->T0 paged vLLM (get)" : "T0->T1 paged vLLM (put)", size, KvCopyPathName(path),
            gbps, in ? b.ceil.h2d : b.ceil.d2h);
    }
  }
  return absl::OkStatus();
}

void PrintTable(const Bench& b) {
  std::printf(
      "\n| transfer | size | path | GB/s | %% of ceiling | ceiling GB/s |\n"
      "| --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : b.rows) {
    std::printf("| %s | %s | %s | %.1f | %.0f%% | %.1f |\n", r.transfer.c_str(), r.size.c_str(),
                r.path.c_str(), r.gbps, 100 * r.gbps / r.ceiling, r.ceiling);
  }
}

absl::Status Run(const Options& o) {
  KVTIER_RETURN_IF_ERROR(gpu::SetDevice(0));
  KVTIER_ASSIGN_OR_RETURN(const gpu::DeviceInfo info, gpu::GetDeviceInfo(0));
  Bench b;
  b.options = o;
  b.big = static_cast<size_t>(o.gib * kGiB) / (4 << 20) * (4 << 20);
  b.batch = b.big / 2;
  if (b.batch < (8 << 20)) return absl::InvalidArgumentError("--gib is too small (>= 1/64)");
  std::printf(
      "GPU transfers on %s (%s backend, %d SMs); host memory mmap + HostRegister; best of "
      "%d; %.2f GiB ceiling copies, %.2f GiB batches\n\n",
      info.name.c_str(), gpu::BackendName(), info.multiprocessors, o.repeat, b.big / kGiB,
      b.batch / kGiB);
  for (int i = 0; i < 2; ++i) {
    KVTIER_ASSIGN_OR_RETURN(b.host[i], HostBuffer::Create(b.big));
    KVTIER_ASSIGN_OR_RETURN(b.dev[i], DeviceBuffer::Create(b.big));
  }
  KVTIER_ASSIGN_OR_RETURN(b.timer, Timer::Create(o.repeat));
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<KvCopier> copier, KvCopier::Create());
  KVTIER_RETURN_IF_ERROR(MeasureCeilings(b));
  for (size_t payload : {32 * kKiB, 256 * kKiB, 512 * kKiB, 2048 * kKiB}) {
    KVTIER_RETURN_IF_ERROR(MeasureDmaBatches(b, payload));
  }
  for (uint32_t block_tokens : {8u, 16u, 32u}) {
    KVTIER_RETURN_IF_ERROR(MeasurePaged(b, *copier, block_tokens));
  }
  PrintTable(b);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  const kvtier::Options o = kvtier::ParseArgs(argc, argv);
  const std::string reason = kvtier::gpu::UnavailableReason();
  if (!reason.empty()) {
    std::printf("kvtier_gpu_transfer_bench needs a GPU: %s; skipped\n", reason.c_str());
    return 0;
  }
  const absl::Status s = kvtier::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "kvtier_gpu_transfer_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
