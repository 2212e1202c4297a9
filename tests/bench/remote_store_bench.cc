// The remote tier's store (tiers/remote/remote_store.h) against one Redis server: put and get
// throughput (GB/s of payload) and per-call latency at 256 KiB and 2 MiB payloads with pipelining,
// next to the ceiling measured in the same run on the same server: `redis-benchmark -t set` and
// `-t get` with the same value size (-d), pipeline depth (-P) and client count (-c)
// (docs/benchmarks.md "Remote tier (Redis protocol)"). The goal is >= 80% of that ceiling.
//
//   kvtier_remote_store_bench [--host H --port P] [--pipeline 8] [--clients 1] [--mib 512]
//                             [--keyspace-mib 64] [--repeat 2] [--sizes-kib 256,2048]
//                             [--ops put,get]
//
// --sizes-kib and --ops pick the cases (the ceiling always runs both: its GETs read what its SETs
// wrote). --ceiling off skips redis-benchmark and prints no ratio: for profiling the
// store alone (perf record), never for a figure. redis-server and redis-benchmark are found on
// PATH.
//
// Without --port it starts its own redis-server (persistence off) on a free loopback port in a
// temporary directory. Each client is a thread calling Put/Get with `pipeline` blocks per call,
// over a keyspace of keyspace-mib; every figure is the best of `repeat` passes (shared, noisy
// machines). Latency is per call (one batch of `pipeline` blocks) for the store and per request
// for redis-benchmark (which, pipelined, is also the batch's round trip). The ceiling is two
// redis-benchmark runs, `-t set` then `-t get` (which reads what the first wrote), so each side's
// CPU time is known: "cpu" is the client's CPU seconds (user + system, every thread) per GB of
// payload, the store's pass against redis-benchmark's process. On a loaded machine the GB/s move
// with the neighbours; the CPU cost per GB is what the client itself decides.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "tests/tiers/remote/redis_test_util.h"
#include "tiers/remote/remote_store.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  uint32_t pipeline = 8;
  uint32_t clients = 1;
  uint64_t mib = 512;
  uint64_t keyspace_mib = 64;
  int repeat = 2;
  std::vector<size_t> sizes = {size_t{256} << 10, size_t{2} << 20};
  bool put = true, get = true;
  bool ceiling = true;
};

// "256,2048" as byte sizes (KiB each); exits on anything else.
std::vector<size_t> ParseSizes(const char* text) {
  std::vector<size_t> out;
  for (const char* at = text; *at != '\0';) {
    char* end = nullptr;
    const unsigned long long kib = std::strtoull(at, &end, 10);
    if (end == at || kib == 0 || kib > (1u << 20) || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "--sizes-kib: \"%s\" is not a list like 256,2048\n", text);
      std::exit(2);
    }
    out.push_back(static_cast<size_t>(kib) << 10);
    at = *end == ',' ? end + 1 : end;
  }
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--host") {
      a.host = v;
    } else if (k == "--port") {
      a.port = static_cast<uint16_t>(std::atoi(v));
    } else if (k == "--pipeline") {
      a.pipeline = static_cast<uint32_t>(std::max(1, std::atoi(v)));
    } else if (k == "--clients") {
      a.clients = static_cast<uint32_t>(std::max(1, std::atoi(v)));
    } else if (k == "--mib") {
      a.mib = std::strtoull(v, nullptr, 10);
    } else if (k == "--keyspace-mib") {
      a.keyspace_mib = std::strtoull(v, nullptr, 10);
    } else if (k == "--repeat") {
      a.repeat = std::max(1, std::atoi(v));
    } else if (k == "--sizes-kib") {
      a.sizes = ParseSizes(v);
    } else if (k == "--ceiling") {
      a.ceiling = std::string(v) != "off";
    } else if (k == "--ops") {
      const std::string ops = v;
      a.put = ops.find("put") != std::string::npos;
      a.get = ops.find("get") != std::string::npos;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Figure {
  double gbps = 0;
  double p50_ms = 0, p99_ms = 0;
  uint64_t failed = 0;      // items not stored / not hits: must be 0 for the figure to count
  double cpu_s_per_gb = 0;  // the client's CPU time (user + system) per GB of payload
};

// CPU seconds (user + system) of this process (RUSAGE_SELF: every thread) or of its children
// reaped so far (RUSAGE_CHILDREN: redis-benchmark once pclose has waited for it).
double CpuSeconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// Each client's payload buffers (pipeline of them) and, for puts, their checksums: made before the
// clock starts, so a pass times the store alone.
struct ClientBuffers {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<uint64_t> checksums;
};

ClientBuffers MakeBuffers(const Args& a, uint32_t client, size_t bytes) {
  ClientBuffers b;
  b.buffers.assign(a.pipeline, std::vector<uint8_t>(bytes));
  for (uint32_t i = 0; i < a.pipeline; ++i) {
    testing::FillPattern(BlockKey{i, client}, b.buffers[i].data(), bytes);
    b.checksums.push_back(PayloadChecksum(b.buffers[i].data(), bytes));
  }
  return b;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// One pass of Put (put = true) or Get by every client over the keyspace until `total` bytes moved.
Figure RunStore(RemoteStore& store, const Args& a, size_t bytes, bool put) {
  const size_t keyspace = std::max<size_t>(a.pipeline, (a.keyspace_mib << 20) / bytes);
  const size_t calls = std::max<size_t>(1, (a.mib << 20) / bytes / a.pipeline / a.clients);
  std::vector<std::vector<double>> latencies(a.clients);
  std::atomic<uint64_t> failed{0};
  std::vector<ClientBuffers> prepared;
  for (uint32_t c = 0; c < a.clients; ++c) prepared.push_back(MakeBuffers(a, c, bytes));
  const Clock::time_point start = Clock::now();
  const double cpu_start = CpuSeconds(RUSAGE_SELF);
  std::vector<std::thread> threads;
  for (uint32_t c = 0; c < a.clients; ++c) {
    threads.emplace_back([&, c] {
      // Put payloads carry their checksum, as the ladder's blocks do (computed when they were
      // committed), so a put is not hashed again (verify_puts off, the default).
      std::vector<std::vector<uint8_t>>& buffers = prepared[c].buffers;
      const std::vector<uint64_t>& checksums = prepared[c].checksums;
      for (size_t call = 0; call < calls; ++call) {
        std::vector<RemotePutItem> puts(a.pipeline);
        std::vector<RemoteGetItem> gets(a.pipeline);
        for (uint32_t i = 0; i < a.pipeline; ++i) {
          const BlockKey key{(call * a.pipeline + i + c * 7919) % keyspace, bytes};
          if (put) {
            puts[i].record = BlockRecord{key, 1, static_cast<uint32_t>(bytes), checksums[i]};
            puts[i].payload = buffers[i].data();
          } else {
            gets[i].key = key;
            gets[i].namespace_id = 1;
            gets[i].dst = buffers[i].data();
            gets[i].dst_bytes = static_cast<uint32_t>(bytes);
          }
        }
        const Clock::time_point t0 = Clock::now();
        if (put) {
          (void)store.Put(absl::MakeSpan(puts));
        } else {
          (void)store.Get(absl::MakeSpan(gets));
        }
        latencies[c].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        for (uint32_t i = 0; i < a.pipeline; ++i) {
          const RemoteOutcome o = put ? puts[i].outcome : gets[i].outcome;
          if (o != RemoteOutcome::kHit) ++failed;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = CpuSeconds(RUSAGE_SELF) - cpu_start;
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  Figure f;
  const double gb = static_cast<double>(calls * a.pipeline * a.clients * bytes) / 1e9;
  f.gbps = gb / seconds;
  f.cpu_s_per_gb = cpu / gb;
  f.p50_ms = Percentile(all, 0.5);
  f.p99_ms = Percentile(all, 0.99);
  f.failed = failed;
  return f;
}

// One redis-benchmark run of `test` ("set" or "get"): its --csv row
// "test","rps","avg","min","p50","p95","p99","max" and its CPU time. The get run reads the keys
// the set run wrote (the same -r keyspace).
bool RunRedisBenchmark(const Args& a, uint16_t port, size_t bytes, const char* test, Figure& f) {
  const size_t keyspace = std::max<size_t>(a.pipeline, (a.keyspace_mib << 20) / bytes);
  const size_t requests = std::max<size_t>(keyspace * 8, (a.mib << 20) / bytes);
  const std::string command = "redis-benchmark -h " + a.host + " -p " + std::to_string(port) +
                              " -t " + test + " -d " + std::to_string(bytes) + " -P " +
                              std::to_string(a.pipeline) + " -c " + std::to_string(a.clients) +
                              " -n " + std::to_string(requests) + " -r " +
                              std::to_string(keyspace) + " --csv 2>/dev/null";
  const double cpu_start = CpuSeconds(RUSAGE_CHILDREN);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  char line[512];
  bool found = false;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    char name[16];
    double rps, avg, min, p50, p95, p99, max;
    if (std::sscanf(line, "\"%15[A-Z]\",\"%lf\",\"%lf\",\"%lf\",\"%lf\",\"%lf\",\"%lf\",\"%lf\"",
                    name, &rps, &avg, &min, &p50, &p95, &p99, &max) == 8) {
      f = Figure{rps * static_cast<double>(bytes) / 1e9, p50, p99, 0, 0};
      found = true;
    }
  }
  const bool ok = ::pclose(pipe) == 0 && found;
  const double gb = static_cast<double>(requests * bytes) / 1e9;
  f.cpu_s_per_gb = (CpuSeconds(RUSAGE_CHILDREN) - cpu_start) / gb;
  return ok;
}

Figure Best(const Figure& a, const Figure& b) { return b.gbps > a.gbps ? b : a; }

void Print(const char* op, size_t bytes, const Args& a, const Figure& ours, const Figure& ceiling) {
  std::printf(
      "%-4s %5zu KiB  P=%-3u c=%-2u  store %6.2f GB/s  p50 %7.2f ms  p99 %7.2f ms  cpu %5.2f s/GB",
      op, bytes >> 10, a.pipeline, a.clients, ours.gbps, ours.p50_ms, ours.p99_ms,
      ours.cpu_s_per_gb);
  const char* failed = ours.failed != 0 ? "  (FAILED ITEMS: figure void)" : "";
  if (!a.ceiling) {
    std::printf("  |  no ceiling (--ceiling off): not a figure%s\n", failed);
    return;
  }
  std::printf(
      "  |  redis-benchmark %6.2f GB/s  p50 %7.2f ms  p99 %7.2f ms  cpu %5.2f s/GB  |  %5.1f%%%s\n",
      ceiling.gbps, ceiling.p50_ms, ceiling.p99_ms, ceiling.cpu_s_per_gb,
      100.0 * ours.gbps / ceiling.gbps, failed);
}

int Main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  testing::RedisTempDir dir;
  std::unique_ptr<testing::RedisServer> server;
  if (a.port == 0) {
    auto started = testing::RedisServer::Start(dir.path() + "/server", {});
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    server = std::move(*started);
    a.port = server->port();
  }
  RemoteStoreOptions options;
  options.nodes = {a.host + ":" + std::to_string(a.port)};
  options.max_pipeline = a.pipeline;
  options.pool_per_node = a.clients;
  options.key_prefix = "kvtier:bench:";
  auto store = RemoteStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  std::printf("remote store bench: %s:%u, %u hardware threads, %llu MiB per case, best of %d\n",
              a.host.c_str(), a.port, std::thread::hardware_concurrency(),
              static_cast<unsigned long long>(a.mib), a.repeat);
  for (size_t bytes : a.sizes) {
    Figure put, get, set_ceiling, get_ceiling;
    for (int r = 0; r < a.repeat; ++r) {
      // A get reads what a put wrote: with --ops get, one untimed put pass fills the keyspace.
      if (a.put || r == 0) put = Best(put, RunStore(**store, a, bytes, true));
      if (a.get) get = Best(get, RunStore(**store, a, bytes, false));
      Figure s, g;
      if (!a.ceiling) continue;
      if (!RunRedisBenchmark(a, a.port, bytes, "set", s) ||
          !RunRedisBenchmark(a, a.port, bytes, "get", g)) {
        std::fprintf(stderr, "redis-benchmark failed (is redis-tools installed?)\n");
        return 1;
      }
      set_ceiling = Best(set_ceiling, s);
      get_ceiling = Best(get_ceiling, g);
    }
    if (a.put) Print("put", bytes, a, put, set_ceiling);
    if (a.get) Print("get", bytes, a, get, get_ceiling);
  }
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Main(argc, argv); }
