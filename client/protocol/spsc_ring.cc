#include "client/protocol/spsc_ring.h"

#include <fmt/format.h>

#include <atomic>
#include <cstring>

namespace kvtier::protocol {
namespace {

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free &&
                  std::atomic_ref<uint32_t>::is_always_lock_free,
              "ring words are shared between processes: they must be lock-free atomics");

uint64_t Load(uint64_t& word, std::memory_order order) {
  return std::atomic_ref<uint64_t>(word).load(order);
}
void Store(uint64_t& word, uint64_t value, std::memory_order order) {
  std::atomic_ref<uint64_t>(word).store(value, order);
}
// The sleep handshake (spsc_ring.h) is a Dekker pattern: each side stores one word, then loads
// the other's. It needs those stores and loads in one total order, so all four are seq_cst (on
// x86 the store is an xchg, as costly as the mfence a fence would be, and the load a plain mov;
// ThreadSanitizer models seq_cst operations but not standalone fences). Index stores are the
// publishing stores, so seq_cst also gives them the release the records need.
constexpr std::memory_order kHandshake = std::memory_order_seq_cst;

bool Sleeping(uint32_t& flag) { return std::atomic_ref<uint32_t>(flag).load(kHandshake) != 0; }
void SetSleeping(uint32_t& flag, bool sleeping) {
  std::atomic_ref<uint32_t>(flag).store(sleeping ? 1 : 0, kHandshake);
}

// Wakes the peer if it has announced that it sleeps; counts the rings in `rung`. Called after the
// seq_cst store of our index (the waker's half of the handshake).
// The waker takes the flag down itself (exchange): the records pushed before the sleeper has run
// again find it 0 and ring no more, so a burst costs one system call, not one per record.
void WakeIfSleeping(uint32_t& peer_flag, const EventFd* peer_bell, uint64_t* rung) {
  if (peer_bell == nullptr || !Sleeping(peer_flag)) return;
  if (std::atomic_ref<uint32_t>(peer_flag).exchange(0, kHandshake) != 0) {
    peer_bell->Signal();
    ++*rung;
  }
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

absl::Status Impossible(const char* who, uint64_t head, uint64_t tail, uint32_t entries) {
  return absl::DataLossError(fmt::format(
      "ring: impossible {} index (head {}, tail {}, {} entries): the peer corrupted the ring", who,
      head, tail, entries));
}

}  // namespace

RingProducer::RingProducer(RingMemory ring, const EventFd* peer_bell)
    : ring_(ring),
      peer_bell_(peer_bell),
      head_(Load(ring.control->head, std::memory_order_relaxed)),
      cached_tail_(head_ - ring.entries) {}  // "full" until the real tail is read and checked

absl::StatusOr<bool> RingProducer::HasSpace() {
  if (head_ - cached_tail_ < ring_.entries) return true;
  const uint64_t tail = Load(ring_.control->tail, kHandshake);
  if (head_ - tail > ring_.entries) return Impossible("consumer", head_, tail, ring_.entries);
  cached_tail_ = tail;  // only a possible index is ever kept
  return head_ - cached_tail_ < ring_.entries;
}

absl::StatusOr<bool> RingProducer::TryPush(const void* record) {
  KVTIER_ASSIGN_OR_RETURN(const bool space, HasSpace());
  if (!space) return false;
  std::byte* slot = ring_.records + (head_ & (ring_.entries - 1)) * size_t{kRecordBytes};
  std::memcpy(slot, record, kRecordBytes);
  ++head_;
  Store(ring_.control->head, head_, kHandshake);
  WakeIfSleeping(ring_.control->consumer_sleeping, peer_bell_, &bells_rung_);
  return true;
}

absl::Status RingProducer::Push(const void* record, const EventFd& own_bell, int spin) {
  for (int spins = 0;; ++spins) {
    KVTIER_ASSIGN_OR_RETURN(const bool pushed, TryPush(record));
    if (pushed) return absl::OkStatus();
    if (spins < spin) {
      CpuRelax();
      continue;
    }
    SetSleeping(ring_.control->producer_sleeping, true);
    absl::StatusOr<bool> space = HasSpace();
    if (space.ok() && !*space) {
      ++sleeps_;
      space = own_bell.Wait();
    }
    SetSleeping(ring_.control->producer_sleeping, false);
    KVTIER_RETURN_IF_ERROR(space.status());
  }
}

RingConsumer::RingConsumer(RingMemory ring, const EventFd* peer_bell)
    : ring_(ring),
      peer_bell_(peer_bell),
      tail_(Load(ring.control->tail, std::memory_order_relaxed)),
      cached_head_(tail_) {}

absl::StatusOr<bool> RingConsumer::HasRecord() {
  if (cached_head_ != tail_) return true;
  const uint64_t head = Load(ring_.control->head, kHandshake);
  if (head - tail_ > ring_.entries) return Impossible("producer", head, tail_, ring_.entries);
  cached_head_ = head;  // only a possible index is ever kept
  return cached_head_ != tail_;
}

absl::StatusOr<bool> RingConsumer::TryPop(void* record) {
  KVTIER_ASSIGN_OR_RETURN(const bool ready, HasRecord());
  if (!ready) return false;
  const std::byte* slot = ring_.records + (tail_ & (ring_.entries - 1)) * size_t{kRecordBytes};
  std::memcpy(record, slot, kRecordBytes);
  ++tail_;
  Store(ring_.control->tail, tail_, kHandshake);
  WakeIfSleeping(ring_.control->producer_sleeping, peer_bell_, &bells_rung_);
  return true;
}

absl::Status RingConsumer::Pop(void* record, const EventFd& own_bell, int spin) {
  for (int spins = 0;; ++spins) {
    KVTIER_ASSIGN_OR_RETURN(const bool popped, TryPop(record));
    if (popped) return absl::OkStatus();
    if (spins < spin) {
      CpuRelax();
      continue;
    }
    KVTIER_ASSIGN_OR_RETURN(const bool sleep, PrepareToSleep());
    if (!sleep) continue;
    ++sleeps_;
    absl::StatusOr<bool> woken = own_bell.Wait();
    EndSleep();
    KVTIER_RETURN_IF_ERROR(woken.status());
  }
}

absl::StatusOr<bool> RingConsumer::PrepareToSleep() {
  SetSleeping(ring_.control->consumer_sleeping, true);
  absl::StatusOr<bool> ready = HasRecord();
  if (!ready.ok() || *ready) EndSleep();
  if (!ready.ok()) return ready.status();
  return !*ready;
}

void RingConsumer::EndSleep() { SetSleeping(ring_.control->consumer_sleeping, false); }

}  // namespace kvtier::protocol
