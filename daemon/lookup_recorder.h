// LookupRecorder: `kvtierd --record FILE` writes every lookup as one line of the Mooncake trace
// format that `kvtier replay` reads (DESIGN.md "Trace replay"), so operators can capture production
// traffic and size their tiers offline:
//
//   {"timestamp": <ms since the recording began>, "input_length": <keys x block_tokens>,
//    "output_length": 0, "hash_ids": [<id>, ...]}
//
// Replay it with `--block-tokens` set to the namespaces' block_tokens (16 by default; the Mooncake
// format's own default is 512). An id is the top 53 bits of the daemon key's low half (exact in any
// JSON reader's doubles), so equal blocks get equal ids across namespaces and clients, and
// different blocks collide with probability ~n^2 / 2^54. Daemon keys are scoped and secret-keyed
// (key_scope.h): the trace names no tokens and cannot be turned back into keys a client could send.
//
// Thread-safety: every method may be called from any thread; lines never interleave.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/status.h"
#include "index/block_key.h"

namespace kvtier {

class LookupRecorder {
 public:
  // Opens `path` for appending (created 0640). Errors name the path.
  static absl::StatusOr<std::unique_ptr<LookupRecorder>> Open(const std::string& path);
  ~LookupRecorder();

  // One trace for all namespaces: replay models the tiers they share.
  void Record(uint32_t block_tokens, absl::Span<const BlockKey> keys);
  // Writes buffered lines to the file.
  void Flush();
  // Closes and reopens the path (after log rotation; kvtierd does it on SIGHUP).
  absl::Status Reopen();
  uint64_t lines() const;

  static uint64_t TraceId(const BlockKey& key) { return key.lo >> 11; }

 private:
  LookupRecorder(std::string path, std::FILE* file);

  const std::string path_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  uint64_t lines_ ABSL_GUARDED_BY(mu_) = 0;
  std::string line_ ABSL_GUARDED_BY(mu_);  // scratch
};

}  // namespace kvtier
