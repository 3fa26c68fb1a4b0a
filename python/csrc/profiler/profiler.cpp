#include "profiler/profiler.h"

#include <atomic>
#include <mutex>
#include <utility>

#include <c10/util/ApproximateClock.h>

namespace neuronsim::pytorch::profiling {
namespace {

std::atomic<bool> active{false};
std::mutex mu;  // guards events
std::vector<DeviceEvent> events;
// Each thread's stack of the ops it is inside (the innermost launches the kernel).
thread_local std::vector<uint64_t> correlations;

}  // namespace

bool recording() {
  return active.load(std::memory_order_relaxed);
}

int64_t host_now_ns() {
  return c10::getTime();
}

void record(DeviceEvent e) {
  if (!recording()) return;
  if (!correlations.empty()) e.correlation = correlations.back();
  std::lock_guard lock(mu);
  events.push_back(std::move(e));
}

void begin() {
  std::lock_guard lock(mu);
  events.clear();
  active = true;
}

std::vector<DeviceEvent> end() {
  active = false;
  std::lock_guard lock(mu);
  return std::exchange(events, {});
}

void push_correlation(uint64_t id) {
  correlations.push_back(id);
}

void pop_correlation() {
  if (!correlations.empty()) correlations.pop_back();
}

}  // namespace neuronsim::pytorch::profiling
