#include "engine/prefix_loader.h"

#include <algorithm>
#include <utility>

#include "client/protocol/wire_format.h"

namespace kvtier::engine {
namespace {
constexpr size_t kMaxPerCall = 1024;  // the protocol's items per request
}  // namespace

PrefixLoader::PrefixLoader(std::unique_ptr<client::Client> client, Tier tier)
    : client_(std::move(client)), tier_(tier), thread_([this] { Loop(); }) {}

PrefixLoader::~PrefixLoader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t PrefixLoader::Start(std::vector<BlockKey> keys) {
  absl::MutexLock lock(&mu_);
  keys.resize(std::min(keys.size(), kMaxPerCall));
  const uint64_t ticket = next_ticket_++;
  jobs_[ticket].keys = std::move(keys);
  queue_.push_back(ticket);
  return ticket;
}

PrefixLoader::Result PrefixLoader::Poll(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(ticket);
  return it == jobs_.end() ? Result{} : it->second.result;
}

void PrefixLoader::Finish(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(ticket);
  if (it == jobs_.end() || it->second.finished) return;
  if (auto q = std::find(queue_.begin(), queue_.end(), ticket); q != queue_.end()) {
    queue_.erase(q);  // not started: nothing to read, nothing leased
    jobs_.erase(it);
    return;
  }
  if (!it->second.result.done) {
    it->second.finished = true;  // in flight: the thread gives its leases back when it ends
    return;
  }
  to_release_.insert(to_release_.end(), it->second.leased.begin(), it->second.leased.end());
  jobs_.erase(it);
}

int64_t PrefixLoader::jobs_started() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(next_ticket_ - 1);
}

int64_t PrefixLoader::jobs_sent() const {
  absl::MutexLock lock(&mu_);
  return jobs_sent_;
}

void PrefixLoader::Loop() {
  for (;;) {
    std::vector<BlockKey> release, keys;
    uint64_t ticket = 0;  // 0: no job this round
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PrefixLoader* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) {
            return l->stop_ || !l->queue_.empty() || !l->to_release_.empty();
          },
          this));
      if (stop_) return;
      release.swap(to_release_);
      if (!queue_.empty()) {
        ticket = queue_.front();
        queue_.pop_front();
        keys = jobs_[ticket].keys;
        ++jobs_sent_;
      }
    }
    GiveBack(release);
    if (ticket != 0) Load(ticket, keys);
  }
}

void PrefixLoader::Load(uint64_t ticket, const std::vector<BlockKey>& keys) {
  absl::StatusOr<std::vector<protocol::BlockResult>> got =
      keys.empty() ? std::vector<protocol::BlockResult>{} : client_->Get(keys, tier_);
  std::vector<BlockKey> leased;
  size_t run = 0;
  if (got.ok()) {
    for (size_t i = 0; i < got->size(); ++i) {
      const bool ok = static_cast<protocol::BlockCode>((*got)[i].code) == protocol::BlockCode::kOk;
      if (ok) leased.push_back(keys[i]);
      if (ok && run == i) ++run;
    }
  }
  absl::MutexLock lock(&mu_);
  Job& job = jobs_[ticket];
  if (job.finished) {  // nobody waits for it any more
    to_release_.insert(to_release_.end(), leased.begin(), leased.end());
    jobs_.erase(ticket);
    return;
  }
  job.result.done = true;
  job.result.run = run;
  job.result.status = got.status();
  job.leased = std::move(leased);
}

void PrefixLoader::GiveBack(const std::vector<BlockKey>& keys) {
  for (size_t at = 0; at < keys.size(); at += kMaxPerCall) {
    const size_t n = std::min(kMaxPerCall, keys.size() - at);
    (void)client_->Release(absl::MakeConstSpan(keys).subspan(at, n));  // gone with the connection
  }
}

}  // namespace kvtier::engine
