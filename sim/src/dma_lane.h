// One DMA engine serving its queues in turn.
//
// A DMA engine takes descriptors from its queues round robin, and each queue in order (the DMA
// overview, docs/cost-model.md §4.2 "Queues"). Descriptors are short against most transfers, so
// the lane is a fluid: while k queues hold a transfer, each queue's first transfer moves at 1/k
// of the engine's speed (processor sharing with equal weights). A virtual clock that advances at
// 1/k of real time gives each transfer a fixed tag, its virtual finish time, when it arrives;
// transfers finish in the order of their tags whatever arrives later. Times are integers, the
// virtual clock in 1/kScale ps, so a run gives the same times everywhere.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>

namespace neuronsim::sim {

class DmaLane {
 public:
  struct Transfer {
    uint64_t work_ps = 0;  // the transfer's time alone on the engine
    uint64_t id = 0;       // the caller's name for it
    uint64_t head_ps = 0;  // when its queue began to serve it
    uint64_t tag = 0;      // virtual finish time, in 1/kScale ps
  };
  using Done = std::function<void(const Transfer&, uint64_t finish_ps)>;

  // Queues a transfer at time `now`, which is no earlier than the lane's time: advance first.
  void add(uint64_t now, int queue, uint64_t work_ps, uint64_t id);
  // Moves the lane to time t, calling done for each transfer that finishes by then, in order.
  void advance(uint64_t t, const Done& done);
  // When the next transfer finishes if nothing more arrives; the maximum when idle.
  uint64_t next_finish() const;
  bool idle() const { return queues_.empty(); }
  // Time spent with at least one transfer under way.
  uint64_t busy_ps() const { return busy_ps_; }

 private:
  static constexpr uint64_t kScale = 1024;
  uint64_t min_tag() const;

  std::map<int, std::deque<Transfer>> queues_;  // the queues holding a transfer
  uint64_t now_ps_ = 0;
  uint64_t virtual_ = 0;
  uint64_t busy_ps_ = 0;
};

}  // namespace neuronsim::sim
