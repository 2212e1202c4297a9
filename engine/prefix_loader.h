// Promotes sequences' cached prefixes into the engine's tier on a connection and thread of its
// own, so the engine's steps (the running sequences' decodes) go on while kvtierd reads a prefix
// up from T1 or T2. Without it, the lease that promotes a prefix blocks the engine loop for the
// whole copy: ~20 ms per GiB from T1, seconds from a disk (docs/benchmarks.md, the trace served on
// kvtierd).
//
// A job leases its keys in `tier` on the loader's own connection (kvtierd promotes each block
// into the tier and joins concurrent requests for it); its result is the leading run of blocks
// that are there now. Those stay leased by the loader, so nothing evicts them, until Finish: the
// engine first leases the run on its own connection (now a hit in its tier, no copy), then calls
// Finish, and the loader gives its leases back in the background. A job finished before it ended
// gives its leases back when it ends.
//
// Thread-safety: Start, Poll and Finish may be called from any thread (the engine calls them
// from its one scheduling thread). The client is used by the loader's thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "client/kvtier_client.h"
#include "common/status.h"
#include "index/block_key.h"
#include "index/tier.h"

namespace kvtier::engine {

class PrefixLoader {
 public:
  // `client`: a connection of its own to the engine's daemon, in the engine's namespace (the
  // same keys). `tier`: the engine's (T0 on the GPU, T1 on the CPU).
  PrefixLoader(std::unique_ptr<client::Client> client, Tier tier);
  // Stops the thread after the request in flight; the connection's leases go back with it.
  ~PrefixLoader();
  PrefixLoader(const PrefixLoader&) = delete;
  PrefixLoader& operator=(const PrefixLoader&) = delete;

  // Starts leasing `keys` (the first 1024, the protocol's batch) in the tier; returns the job's
  // ticket (never 0).
  uint64_t Start(std::vector<BlockKey> keys);
  // Where a job stands: running (done false); or done, with the number of its leading keys now
  // in the tier (run), or the error of its request (the daemon went away).
  struct Result {
    bool done = false;
    size_t run = 0;
    absl::Status status;
  };
  // Precondition: `ticket` is not finished.
  Result Poll(uint64_t ticket);
  // Forgets the job and gives its leases back (now, or when its request ends). A job still queued
  // behind another is dropped unsent: a cancelled load reads nothing and delays no other.
  void Finish(uint64_t ticket);

  // Jobs started so far, and of those the ones whose request went to the daemon (tests, logs).
  int64_t jobs_started() const;
  int64_t jobs_sent() const;

 private:
  struct Job {
    std::vector<BlockKey> keys;
    bool finished = false;  // Finish came first: the thread gives the leases back when done
    Result result;
    std::vector<BlockKey> leased;  // every key the job's request leased
  };
  void Loop();
  // Leases job `id`'s keys; runs on the thread without the lock.
  void Load(uint64_t ticket, const std::vector<BlockKey>& keys);
  void GiveBack(const std::vector<BlockKey>& keys);

  std::unique_ptr<client::Client> client_;  // the thread's only
  const Tier tier_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);  // by ticket
  std::deque<uint64_t> queue_ ABSL_GUARDED_BY(mu_);               // jobs to run, in order
  std::vector<BlockKey> to_release_ ABSL_GUARDED_BY(mu_);         // leases to give back
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t jobs_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread thread_;  // last: started when the rest is ready
};

}  // namespace kvtier::engine
