#include "tools/bench/bench_run.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace kvtier::bench {
namespace {

struct Shared {
  StartGate gate;
  WorkerResult results[1];  // really workers() of them
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A child process: its threads' workers, then _exit without running the parent's atexit work.
[[noreturn]] void RunChild(const BenchOptions& o, const replay::Trace* trace, uint32_t process,
                           Shared* shared) {
  auto zipf = SequencePicker::MakeZipf(o.space);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.threads; ++t) {
    const uint32_t worker = process * o.threads + t;
    threads.emplace_back([&o, trace, zipf, worker, shared] {
      WorkerContext c{&o, trace, zipf, worker};
      RunWorker(c, &shared->gate, &shared->results[worker]);
    });
  }
  for (std::thread& t : threads) t.join();
  ::_exit(0);
}

// Waits until every worker is ready; false if a child exited first.
bool AwaitReady(Shared* shared, uint32_t workers, const std::vector<pid_t>& children) {
  while (shared->gate.ready.load() < workers) {
    for (pid_t pid : children) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

absl::StatusOr<BenchTotals> Collect(const BenchOptions& o, const Shared* shared, int64_t go_ns) {
  BenchTotals totals;
  int64_t end = go_ns;
  for (uint32_t w = 0; w < o.workers(); ++w) {
    const WorkerResult& r = shared->results[w];
    if (r.error[0] != '\0') return absl::UnavailableError(r.error);
    for (int op = 0; op < kRecordedOps; ++op) totals.op[op].Merge(r.op[op]);
    end = std::max(end, r.end_ns);
    totals.payload_bytes = r.payload_bytes;
  }
  totals.window_s = static_cast<double>(end - go_ns) / 1e9;
  return totals;
}

}  // namespace

absl::StatusOr<BenchTotals> RunBench(const BenchOptions& o, const replay::Trace* trace) {
  const size_t bytes = sizeof(Shared) + sizeof(WorkerResult) * o.workers();
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return absl::ResourceExhaustedError("mmap of the results failed");
  auto* shared = new (mem) Shared();
  for (uint32_t w = 1; w < o.workers(); ++w) new (&shared->results[w]) WorkerResult();
  std::vector<pid_t> children;
  std::fflush(nullptr);  // or a child's exit could print our buffered output twice
  for (uint32_t p = 0; p < o.processes; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) RunChild(o, trace, p, shared);
    if (pid < 0) break;
    children.push_back(pid);
  }
  const bool ready = children.size() == o.processes && AwaitReady(shared, o.workers(), children);
  const int64_t go_ns = NowNs();
  if (ready) {
    shared->gate.go_ns.store(go_ns);
  } else {
    shared->gate.abort.store(1);
  }
  bool clean = true;
  for (pid_t pid : children) {
    int status = 0;
    if (::waitpid(pid, &status, 0) == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      clean = false;
    }
  }
  absl::StatusOr<BenchTotals> totals =
      clean && ready ? Collect(o, shared, go_ns)
                     : absl::InternalError("a bench worker process failed to start or died");
  ::munmap(mem, bytes);
  return totals;
}

}  // namespace kvtier::bench
