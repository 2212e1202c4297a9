// The whole GPU loop through a live kvtierd: one process puts 8K tokens of Llama-3-8B-shaped KV
// (32 layers, 8 KV heads, head_dim 128, bf16, 16-token blocks: 512 blocks of 2 MiB = 1 GiB) from
// its own GPU memory (a vLLM-layout paged cache); another process gets them back into its own
// paged cache and checks every byte. Each wall time is printed next to its bound, bytes / ceiling,
// where the ceiling is one large pinned cudaMemcpyAsync measured by the same run.
//
//   kvtierd --t1.capacity_bytes 4GiB --t1.slot_bytes 2MiB --t2.enabled false ... &
//   kvtier_gpu_loop_bench --socket kvtier-data/kvtierd.sock [--tokens 8192] [--path
//   auto|dma|kernel] [--repeat 3]
//
// --repeat N puts N different token sets one after the other in the same process, then gets them
// in the same order in the other: the first of each is what a fresh client pays (first use of its
// kernels and buffers), the later ones what an engine pays every time after. T1 must hold N sets.
//
// The processes are forked before either touches the GPU (a CUDA context does not survive fork).
// Every run stores fresh keys (a cache salt unique to the run), and a put that finds any block
// already present is refused: a put that copies nothing would print an impossible bandwidth.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "client/gpu_client.h"
#include "client/kvtier_client.h"
#include "kernels/gpu_runtime.h"
#include "tests/kernels/support/pattern.h"

namespace kvtier {
namespace {

constexpr uint32_t kLayers = 32, kHeads = 8, kHeadDim = 128, kElem = 2, kBlockTokens = 16;

struct Options {
  std::string socket;
  std::string run_salt;  // the namespace's cache salt: fresh keys for every run
  uint32_t tokens = 8192;
  uint32_t repeat = 1;
  std::string path = "auto";
};

struct Cache {
  std::vector<void*> layers;  // [2, blocks, 16, 8, 128] bf16 each
  size_t layer_bytes = 0;
  PagedKvCache layout;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpu_loop_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(fmt::format("{}: {}", what, s.ToString()));
}

Cache MakeCache(uint32_t blocks) {
  Cache c;
  c.layer_bytes = size_t{2} * blocks * kBlockTokens * kHeads * kHeadDim * kElem;
  for (uint32_t l = 0; l < kLayers; ++l) {
    auto p = gpu::DeviceAlloc(c.layer_bytes);
    Check(p.status(), "cudaMalloc of the engine cache");
    c.layers.push_back(*p);
  }
  c.layout = VllmLayout(c.layers, blocks, kBlockTokens, kHeads, kHeadDim, kElem);
  return c;
}

std::unique_ptr<client::Client> Connect(const Options& o, const char* name) {
  client::ClientOptions co;
  co.socket_path = o.socket;
  co.client_name = name;
  co.ns.model_id = "llama-3-8b-bench";
  co.ns.block_tokens = kBlockTokens;
  co.ns.cache_salt = o.run_salt;
  auto c = client::Client::Connect(co);
  Check(c.status(), "connect");
  return std::move(*c);
}

std::unique_ptr<client::GpuClient> Gpu(client::Client* c, const Options& o) {
  client::GpuClientOptions go;
  if (o.path == "dma") go.path = KvCopyPath::kDma;
  if (o.path == "kernel") go.path = KvCopyPath::kKernel;
  auto g = client::GpuClient::Create(c, go);
  Check(g.status(), "GpuClient");
  return std::move(*g);
}

// The prompt of repetition `rep`: disjoint from every other repetition's, so every key is new.
std::vector<uint32_t> Tokens(const Options& o, uint32_t rep) {
  std::vector<uint32_t> t(o.tokens);
  std::iota(t.begin(), t.end(), 7u + rep * o.tokens);
  return t;
}

// Putter: fills its cache with a pattern per layer, puts every block once per repetition (fresh
// keys each time), returns the seconds of each put.
std::vector<double> RunPut(const Options& o) {
  Check(gpu::SetDevice(0), "device");
  const uint32_t blocks = o.tokens / kBlockTokens;
  Cache cache = MakeCache(blocks);
  auto stream = gpu::Stream::Create();
  Check(stream.status(), "stream");
  for (uint32_t l = 0; l < kLayers; ++l) {
    Check(FillPattern(cache.layers[l], cache.layer_bytes, 1000 + l, stream->handle()), "fill");
  }
  Check(stream->Synchronize(), "fill sync");
  auto client = Connect(o, "loop-put");
  auto gpu = Gpu(client.get(), o);
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<double> secs;
  for (uint32_t rep = 0; rep < o.repeat; ++rep) {
    const std::vector<BlockKey> keys = client->KeysFor(Tokens(o, rep)).value();
    const double t0 = Now();
    auto t = gpu->PutFromCache(keys, cache.layout, ids, stream->handle());
    Check(t.status(), "put");
    auto codes = t->Wait();
    secs.push_back(Now() - t0);
    Check(codes.status(), "put wait");
    if (codes->size() != keys.size())
      Die(fmt::format("put: {} outcomes for {} blocks", codes->size(), keys.size()));
    for (size_t i = 0; i < codes->size(); ++i) {
      // Only a copied block counts: ALREADY_PRESENT (or anything else) means the figure would
      // time less than the bytes it claims, so the run is refused rather than printed.
      if ((*codes)[i] != protocol::BlockCode::kOk) {
        Die(fmt::format(
            "put {}: block {} got code {}, not OK: the bandwidth would count bytes that "
            "were never copied; refusing to print it",
            rep + 1, i, static_cast<int>((*codes)[i])));
      }
    }
  }
  return secs;
}

// One large pinned copy each way: the ceiling the loop is held against.
void Ceilings(size_t bytes, double* h2d, double* d2h) {
  auto host = gpu::PinnedAlloc(bytes);
  auto dev = gpu::DeviceAlloc(bytes);
  Check(host.status(), "pinned");
  Check(dev.status(), "device");
  auto s = gpu::Stream::Create();
  Check(s.status(), "stream");
  *h2d = *d2h = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = Now();
    Check(gpu::CopyAsync(*dev, *host, bytes, s->handle()), "h2d");
    Check(s->Synchronize(), "h2d sync");
    *h2d = std::max(*h2d, bytes / (Now() - t0) / 1e9);
    t0 = Now();
    Check(gpu::CopyAsync(*host, *dev, bytes, s->handle()), "d2h");
    Check(s->Synchronize(), "d2h sync");
    *d2h = std::max(*d2h, bytes / (Now() - t0) / 1e9);
  }
  (void)gpu::DeviceFree(*dev);
  (void)gpu::PinnedFree(*host);
}

// Gets one repetition's blocks into `cache`, checks every byte, returns the get's seconds.
double GetOnce(const Options& o, uint32_t rep, client::Client* client, client::GpuClient* gpu,
               const Cache& cache, const gpu::Stream& s) {
  const gpu::StreamHandle stream = s.handle();
  const uint32_t blocks = o.tokens / kBlockTokens;
  for (void* l : cache.layers) Check(gpu::MemsetAsync(l, 0, cache.layer_bytes, stream), "zero");
  Check(s.Synchronize(), "zero sync");
  const std::vector<BlockKey> keys = client->KeysFor(Tokens(o, rep)).value();
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  const double t0 = Now();
  auto t = gpu->GetIntoCache(keys, cache.layout, ids, stream);
  Check(t.status(), "get");
  Check(s.Synchronize(), "get sync");
  const double secs = Now() - t0;
  auto codes = t->Wait();
  Check(codes.status(), "get wait");
  if (t->copied_blocks() != blocks)
    Die(fmt::format("get {}: copied {} of {} blocks", rep + 1, t->copied_blocks(), blocks));
  std::vector<std::byte> got(cache.layer_bytes), want(cache.layer_bytes);
  for (uint32_t l = 0; l < kLayers; ++l) {
    Check(gpu::CopyAsync(got.data(), cache.layers[l], cache.layer_bytes, stream), "check copy");
    Check(s.Synchronize(), "check sync");
    FillPatternReference(want.data(), cache.layer_bytes, 1000 + l);
    if (std::memcmp(got.data(), want.data(), cache.layer_bytes) != 0)
      Die(fmt::format("get {}: layer {} differs", rep + 1, l));
  }
  return secs;
}

void PrintRow(const char* step, uint32_t rep, double secs, double bytes, double ceiling,
              const char* dir) {
  const double bound = bytes / ceiling / 1e9;
  std::printf("| %s | %u%s | %.1f | %.1f | %.1f (%s) | %.1f | %.2f |\n", step, rep + 1,
              rep == 0 ? " (first)" : "", secs * 1e3, bytes / secs / 1e9, ceiling, dir, bound * 1e3,
              secs / bound);
}

// Getter: gets every repetition's blocks into its own cache, checks every byte, prints the table.
int RunGet(const Options& o, const std::vector<double>& put_secs) {
  Check(gpu::SetDevice(0), "device");
  const uint32_t blocks = o.tokens / kBlockTokens;
  Cache cache = MakeCache(blocks);
  auto stream = gpu::Stream::Create();
  Check(stream.status(), "stream");
  auto client = Connect(o, "loop-get");
  auto gpu = Gpu(client.get(), o);
  std::vector<double> get_secs;
  for (uint32_t rep = 0; rep < o.repeat; ++rep) {
    get_secs.push_back(GetOnce(o, rep, client.get(), gpu.get(), cache, *stream));
  }
  const double bytes = static_cast<double>(cache.layout.payload_bytes()) * blocks;
  double h2d = 0, d2h = 0;
  Ceilings(size_t{1} << 30, &h2d, &d2h);
  // A figure above its ceiling means bytes were counted that never moved: say so, print nothing.
  for (uint32_t rep = 0; rep < o.repeat; ++rep) {
    if (bytes / put_secs[rep] / 1e9 > 1.1 * d2h || bytes / get_secs[rep] / 1e9 > 1.1 * h2d)
      Die(
          fmt::format("put {:.1f} GB/s or get {:.1f} GB/s exceeds its ceiling ({:.1f} / {:.1f}) "
                      "by over 10%: the run is wrong, not fast",
                      bytes / put_secs[rep] / 1e9, bytes / get_secs[rep] / 1e9, d2h, h2d));
  }
  std::printf("%u tokens, %u blocks of %.1f MiB, %.2f GiB; path %s; every byte checked\n\n",
              o.tokens, blocks, cache.layout.payload_bytes() / 1048576.0, bytes / (1 << 30),
              o.path.c_str());
  std::printf(
      "| step | run | wall ms | GB/s | ceiling GB/s (1 GiB pinned copy) | bound ms | wall / "
      "bound |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (uint32_t rep = 0; rep < o.repeat; ++rep)
    PrintRow("put (GPU -> T1, checksum, commit)", rep, put_secs[rep], bytes, d2h, "D2H");
  for (uint32_t rep = 0; rep < o.repeat; ++rep)
    PrintRow("get (lease, T1 -> GPU, release)", rep, get_secs[rep], bytes, h2d, "H2D");
  return 0;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--socket")
      o.socket = argv[i + 1];
    else if (f == "--tokens")
      o.tokens = static_cast<uint32_t>(std::stoul(argv[i + 1]));
    else if (f == "--path")
      o.path = argv[i + 1];
    else if (f == "--repeat")
      o.repeat = static_cast<uint32_t>(std::stoul(argv[i + 1]));
    else
      Die("usage: kvtier_gpu_loop_bench --socket PATH [--tokens N] [--path auto|dma|kernel] "
          "[--repeat N]");
  }
  if (o.socket.empty() || o.tokens < kBlockTokens) Die("--socket is required; --tokens >= 16");
  if (o.repeat < 1 || o.repeat > 64) Die("--repeat: 1 to 64");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  o.run_salt = fmt::format("gpu-loop-bench-{}-{}", ::getpid(),
                           std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  return o;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  const kvtier::Options o = kvtier::Parse(argc, argv);
  // No runtime call here: a CUDA context (even the driver's init) must not exist before fork.
  if (std::string(kvtier::gpu::BackendName()) == "none") {
    std::printf("gpu_loop_bench: needs a GPU build (this is the CPU-only variant); skipped\n");
    return 0;
  }
  int fds[2];
  if (::pipe(fds) != 0) kvtier::Die("pipe");
  const pid_t putter = ::fork();
  if (putter == 0) {
    const std::vector<double> secs = kvtier::RunPut(o);
    std::fflush(stdout);
    const auto len = static_cast<ssize_t>(secs.size() * sizeof(double));
    if (::write(fds[1], secs.data(), secs.size() * sizeof(double)) != len) _exit(1);
    _exit(0);
  }
  std::vector<double> put_secs(o.repeat);
  const auto len = static_cast<ssize_t>(put_secs.size() * sizeof(double));
  int status = 0;
  ::waitpid(putter, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      ::read(fds[0], put_secs.data(), put_secs.size() * sizeof(double)) != len) {
    kvtier::Die("the putting process failed");
  }
  const pid_t getter = ::fork();
  if (getter == 0) {
    const int rc = kvtier::RunGet(o, put_secs);
    std::fflush(stdout);  // _exit skips stdio's buffers
    _exit(rc);
  }
  ::waitpid(getter, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
