#include "work_queue.h"

#include <algorithm>

namespace neuronsim::sim {

bool conflict(const Work& earlier, const Work& later) {
  return any_overlap(earlier.writes, later.reads) || any_overlap(earlier.writes, later.writes) ||
         any_overlap(earlier.reads, later.writes);
}

// Each core has a queue for its kernels and copies and a side queue for holds that run beside
// them (Hold::touches).
WorkQueue::WorkQueue(uint32_t cores) : cores_(cores), queues_(2 * cores), free_ps_(2 * cores, 0) {}

uint32_t WorkQueue::queue_of(const Work& w) const {
  return w.hold_touches.empty() ? w.core : side_queue(w.core);
}

uint64_t WorkQueue::push(Work w) {
  w.seq = next_seq_++;
  w.queue = queue_of(w);
  pending_.insert(w.seq);
  const uint64_t seq = w.seq;
  queues_[w.queue].push_back(std::move(w));
  return seq;
}

bool WorkQueue::runnable(const Work& head) const {
  for (const auto& q : queues_)
    for (const Work& w : q) {
      if (w.seq >= head.seq) break;                       // queues are in sequence order
      if (head.group && w.group == head.group) continue;  // a group runs as one
      if (conflict(w, head)) return false;
    }
  return true;
}

std::vector<Work*> WorkQueue::take() {
  std::vector<Work*> copies, plain;
  std::map<const CollectiveBinding*, std::vector<Work*>> groups;
  for (auto& q : queues_) {
    if (q.empty() || !runnable(q.front())) continue;
    Work& w = q.front();
    if (w.is_copy)
      copies.push_back(&w);
    else if (w.group)
      groups[w.group.get()].push_back(&w);
    else
      plain.push_back(&w);
  }
  if (!copies.empty()) return copies;
  if (!plain.empty()) return plain;
  for (auto& [binding, members] : groups)
    if (members.size() == members.front()->group_size) return members;
  return {};
}

uint64_t WorkQueue::ready_ps(const Work& w) const {
  return std::max(free_ps_[w.queue], w.after_ps);
}

void WorkQueue::finish(const std::vector<Work*>& batch, std::vector<Completion> done) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const Work& w = *batch[i];
    const uint64_t end = done[i].end_ps;
    free_ps_[w.queue] = std::max(free_ps_[w.queue], end);
    for (auto& q : queues_)
      for (Work& later : q)
        if (later.seq > w.seq && conflict(w, later)) later.after_ps = std::max(later.after_ps, end);
  }
  for (Work* w : batch) queues_[w->queue].pop_front();
  for (Completion& c : done) {
    pending_.erase(c.seq);
    clock_ps_ = std::max(clock_ps_, c.end_ps);
    finished_.emplace(c.seq, std::move(c));
  }
}

std::optional<Completion> WorkQueue::take_completion(uint64_t seq) {
  auto it = finished_.find(seq);
  if (it == finished_.end()) return std::nullopt;
  Completion c = std::move(it->second);
  finished_.erase(it);
  return c;
}

}  // namespace neuronsim::sim
