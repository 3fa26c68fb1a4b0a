// What a device has to do and what it has done: a queue per core for its executions and
// copies, a side queue per core for holds beside them, which heads may run next, and the
// completions not yet taken. Work waits for earlier work on any queue that touches what it
// touches. Not thread-safe: the device guards it with its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "device_memory.h"
#include "neuronsim/sim/device.h"

namespace neuronsim::sim {

// One piece of work on a core's queue.
struct Work {
  uint64_t seq = 0;
  uint32_t core = 0;
  bool is_copy = false;  // a copy, or a hold (a copy of no bytes that ends at hold_until_ps)
  bool is_hold = false;
  uint64_t hold_until_ps = 0;
  std::vector<TensorBinding> hold_touches;  // a hold beside the kernels: what it reads and writes
  uint32_t queue = 0;  // the core's queue, or (a hold beside the kernels) its side queue
  Execution execution;
  Copy copy;
  std::shared_ptr<const CollectiveBinding> group;  // set for the members of a group
  size_t group_size = 0;
  std::vector<Range> reads, writes;  // computed once, when queued
  uint64_t after_ps = 0;             // starts no earlier: the end of earlier work it conflicts with
  uint64_t submit_ps = 0;      // the host clock when it was enqueued: the device starts no earlier
  uint64_t host_bound_ps = 0;  // of its start, how long the ready core waited for the host
};

// Whether `later` must come after `earlier`: one writes what the other reads or writes.
bool conflict(const Work& earlier, const Work& later);

class WorkQueue {
 public:
  explicit WorkQueue(uint32_t cores);

  // The queue `w` goes on: its core's, or the core's side queue for a hold beside the kernels.
  uint32_t queue_of(const Work& w) const;
  uint32_t side_queue(uint32_t core) const { return cores_ + core; }
  // Queues `w` (its reads and writes placed) and returns its sequence number.
  uint64_t push(Work w);
  // Takes what runs next, among the heads of the queues that may run: copies first; else the
  // plain executions (one per core, together in one window); else one group whose members are
  // all at the heads of their queues. Empty when nothing can run.
  std::vector<Work*> take();
  // When `w` may start as far as the queues go: after its queue and the earlier work it
  // conflicts with.
  uint64_t ready_ps(const Work& w) const;
  // The batch `take` gave is done, with these completions (in the batch's order): the queues
  // and the later work that conflicts with it move on, and the completions wait to be taken.
  void finish(const std::vector<Work*>& batch, std::vector<Completion> done);

  bool idle() const { return pending_.empty(); }
  // Whether every piece of work queued up to `seq` is done.
  bool done_through(uint64_t seq) const { return pending_.empty() || *pending_.begin() > seq; }
  // Whether `seq` was given by push (0 never is, so done(0) is false).
  bool issued(uint64_t seq) const { return seq != 0 && seq < next_seq_; }
  bool done(uint64_t seq) const { return issued(seq) && !pending_.count(seq); }
  uint64_t last_seq() const { return next_seq_ - 1; }
  // The completion of `seq`, once; none when it was already taken.
  std::optional<Completion> take_completion(uint64_t seq);
  // When a queue is free on the device clock (the start of a batch that failed as a whole).
  uint64_t free_ps(uint32_t queue) const { return free_ps_[queue]; }
  // The latest end of any work done.
  uint64_t clock_ps() const { return clock_ps_; }

 private:
  // A head may run once no earlier work on another queue touches what it touches.
  bool runnable(const Work& head) const;

  uint32_t cores_;
  std::vector<std::deque<Work>> queues_;
  std::vector<uint64_t> free_ps_;            // when each queue is free on the device clock
  std::set<uint64_t> pending_;               // queued, not yet done
  std::map<uint64_t, Completion> finished_;  // done, not yet taken
  uint64_t next_seq_ = 1;
  uint64_t clock_ps_ = 0;
};

}  // namespace neuronsim::sim
