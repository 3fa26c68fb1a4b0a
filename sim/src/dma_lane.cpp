#include "dma_lane.h"

#include <stdexcept>

namespace neuronsim::sim {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

void DmaLane::add(uint64_t now, int queue, uint64_t work_ps, uint64_t id) {
  if (now < now_ps_) throw std::logic_error("DmaLane::add before the lane's time");
  now_ps_ = now;
  std::deque<Transfer>& q = queues_[queue];
  // A queue serves in order: a transfer starts where the one before it in its queue ends.
  const uint64_t from = q.empty() ? virtual_ : q.back().tag;
  q.push_back({work_ps, id, now, from + work_ps * kScale});
}

uint64_t DmaLane::min_tag() const {
  uint64_t tag = std::numeric_limits<uint64_t>::max();
  for (const auto& [queue, q] : queues_) tag = std::min(tag, q.front().tag);
  return tag;
}

uint64_t DmaLane::next_finish() const {
  if (queues_.empty()) return std::numeric_limits<uint64_t>::max();
  return now_ps_ + ceil_div((min_tag() - virtual_) * queues_.size(), kScale);
}

void DmaLane::advance(uint64_t t, const Done& done) {
  if (t < now_ps_) return;  // already there
  while (!queues_.empty()) {
    const uint64_t finish = next_finish();
    if (finish > t) {
      virtual_ += (t - now_ps_) * kScale / queues_.size();
      busy_ps_ += t - now_ps_;
      now_ps_ = t;
      return;
    }
    busy_ps_ += finish - now_ps_;
    now_ps_ = finish;
    virtual_ = min_tag();
    for (auto it = queues_.begin(); it != queues_.end();) {
      std::deque<Transfer>& q = it->second;
      if (q.front().tag != virtual_) {
        ++it;
        continue;
      }
      const Transfer ended = q.front();
      q.pop_front();
      if (!q.empty()) q.front().head_ps = finish;
      it = q.empty() ? queues_.erase(it) : std::next(it);
      done(ended, finish);
    }
  }
  now_ps_ = std::max(now_ps_, t);
}

}  // namespace neuronsim::sim
