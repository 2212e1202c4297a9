// A single-producer / single-consumer ring of 64-byte records in memory shared by two processes
// (DESIGN.md "Process model and protocol"), with the doorbell protocol that wakes a side only when
// it sleeps: while both sides are busy no operation makes a system call.
//
// Memory: a RingControl (head on one cache line, tail on the next; wire_format.h) and `entries`
// records. The producer owns head and producer_sleeping; the consumer owns tail and
// consumer_sleeping. Each side keeps its own index privately and only ever *reads* the other's,
// so a peer that scribbles on the control words cannot make this side read or write outside the
// ring: an impossible peer index (more than `entries` records apart) is reported as DataLoss and
// the connection is to be closed.
//
// Ordering: a record is copied in, then head is stored; the consumer loads head, then copies the
// record out (so it reads only a private copy), then stores tail, which hands the slot back. Index
// stores and loads are seq_cst (which includes release/acquire), because the sleep handshake needs
// them in one total order with the flags.
//
// Sleeping without lost wakeups (a Dekker handshake; every access below is seq_cst):
//   sleeper:  flag = 1; recheck the ring (load the peer's index); if still nothing, wait on its
//             own bell; flag = 0.
//   waker:    store its own index (publishing); load the peer's flag; if it is 1, set it to 0 by
//             exchange and, if the exchange saw 1, ring the peer's bell.
// Either the waker sees flag = 1 and rings, or the sleeper's recheck sees the new index. An eventfd
// keeps a ring that comes before the wait, so it is not lost either. Wakes can be spurious. The
// waker lowering the flag means one ring per sleep: a burst of records pushed before the sleeper
// runs again makes one system call, not one per record (the sleeper's own flag = 0 on waking is
// then a no-op). So each side also writes the peer's flag; like the indices, a flag a peer
// scribbles on can cost wake-ups or spurious wakes, never a read or write outside the ring.
//
// Who rings whom: the submission ring's producer is the client and its consumer the daemon; the
// completion ring the other way round. Each endpoint holds the *peer's* bell to ring and is given
// its *own* bell to sleep on.
//
// Endpoints read their starting index from the control block once, when constructed; the daemon
// builds its endpoints before it sends the region to the client, so it starts from zeros it wrote.
// Whatever an index holds, slots are addressed modulo `entries`, so no value can move an access
// outside the ring.
//
// Thread-safety: one thread per endpoint at a time (single producer, single consumer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "client/protocol/event_fd.h"
#include "client/protocol/wire_format.h"
#include "common/status.h"

namespace kvtier::protocol {

// One ring in mapped shared memory. Not owned; the mapping must outlive every endpoint over it.
struct RingMemory {
  RingControl* control = nullptr;
  std::byte* records = nullptr;  // entries * kRecordBytes bytes
  uint32_t entries = 0;          // a power of two
};

class RingProducer {
 public:
  // Starts at the ring's current head (0 for a new ring). `peer_bell` is rung when the consumer
  // sleeps; it must outlive this object.
  RingProducer(RingMemory ring, const EventFd* peer_bell);

  // Copies `record` (kRecordBytes bytes) into the ring. Returns false, copying nothing, when the
  // ring is full. DataLoss if the consumer's tail is impossible.
  absl::StatusOr<bool> TryPush(const void* record);
  // As TryPush, but when the ring is full spins `spin` times, then sleeps on `own_bell` until the
  // consumer frees a slot.
  absl::Status Push(const void* record, const EventFd& own_bell, int spin = 0);

  // Doorbells this endpoint rang (system calls it made to wake the peer) and times it slept, for
  // metrics and benchmarks.
  uint64_t bells_rung() const { return bells_rung_; }
  uint64_t sleeps() const { return sleeps_; }

 private:
  absl::StatusOr<bool> HasSpace();

  RingMemory ring_;
  const EventFd* peer_bell_;
  uint64_t head_;         // private copy of what we published
  uint64_t cached_tail_;  // last tail read from the consumer
  uint64_t bells_rung_ = 0;
  uint64_t sleeps_ = 0;
};

class RingConsumer {
 public:
  // Starts at the ring's current tail. `peer_bell` is rung when the producer sleeps on a full
  // ring; it must outlive this object.
  RingConsumer(RingMemory ring, const EventFd* peer_bell);

  // Copies the next record out into `record` (kRecordBytes bytes) and frees its slot. Returns
  // false when the ring is empty. DataLoss if the producer's head is impossible.
  absl::StatusOr<bool> TryPop(void* record);
  // As TryPop, but when the ring is empty spins `spin` times, then sleeps on `own_bell`.
  absl::Status Pop(void* record, const EventFd& own_bell, int spin = 0);

  // For event loops that wait on many fds (the daemon): call PrepareToSleep when idle. True: the
  // ring is still empty and the flag is set, so wait on your bell, then call EndSleep. False:
  // records arrived meanwhile; the flag is already cleared.
  absl::StatusOr<bool> PrepareToSleep();
  void EndSleep();

  // As RingProducer's. sleeps() counts the waits Pop made (PrepareToSleep returning true).
  uint64_t bells_rung() const { return bells_rung_; }
  uint64_t sleeps() const { return sleeps_; }

 private:
  absl::StatusOr<bool> HasRecord();

  RingMemory ring_;
  const EventFd* peer_bell_;
  uint64_t tail_;
  uint64_t cached_head_;
  uint64_t bells_rung_ = 0;
  uint64_t sleeps_ = 0;
};

}  // namespace kvtier::protocol
