// What the device did while torch.profiler records: one event per kernel, copy and
// collective hold, on the device clock, with the op that launched it. The Kineto plugin
// (kineto_profiler.cpp) turns them into device rows of the profile.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace neuronsim::pytorch::profiling {

struct DeviceEvent {
  std::string name;  // the op or program name the work ran under
  std::string kind;  // "kernel", "copy" or "collective"
  int device = 0;    // the device index of the process
  uint32_t core = 0;
  uint64_t start_ps = 0, end_ps = 0;         // on the device clock
  int64_t launched_ns = 0;                   // host time (c10::getTime) when it was launched
  uint64_t correlation = 0;                  // the launching op's profiler correlation id; 0: none
  std::array<uint64_t, 5> engine_busy_ps{};  // PE, ACT, DVE, POOL, SP (kernels)
  uint64_t dma_bytes = 0;
  uint64_t flops = 0;
};

// True while a profiler session records (cheap: the launch paths ask on every kernel).
bool recording();
// The host time launches are stamped with (the profiler's clock).
int64_t host_now_ns();
// Keeps `e`, with the correlation id of the op running on this thread, if recording.
void record(DeviceEvent e);

// The profiler session's side: start recording, stop and take what was recorded.
void begin();
std::vector<DeviceEvent> end();
// The op correlation ids the profiler pushes and pops on the launching thread.
void push_correlation(uint64_t id);
void pop_correlation();

}  // namespace neuronsim::pytorch::profiling
