// Streams and events (see streams.h).
#include "runtime/streams.h"

#include <atomic>
#include <vector>

#include <c10/util/Exception.h>

#include "runtime/backend.h"

namespace neuronsim::pytorch {

namespace {

struct Event {
  uint64_t time_ps = 0;
  c10::DeviceIndex device = 0;
};

std::atomic<int64_t> g_next_stream{1};
thread_local std::vector<c10::StreamId> t_streams;  // current stream per device

c10::StreamId& stream_slot(c10::DeviceIndex index) {
  if (t_streams.size() <= static_cast<size_t>(index)) t_streams.resize(index + 1, 0);
  return t_streams[index];
}

}  // namespace

c10::StreamId current_stream_id(c10::DeviceIndex index) {
  return stream_slot(index);
}

void set_current_stream_id(c10::DeviceIndex index, c10::StreamId id) {
  stream_slot(index) = id;
}

c10::StreamId new_stream_id() {
  return g_next_stream++;
}

void record_event(void** event, c10::DeviceIndex index) {
  if (*event == nullptr) *event = new Event();
  auto* e = static_cast<Event*>(*event);
  e->device = index;
  e->time_ps = Backend::get().now_ps();
}

void destroy_event(void* event) noexcept {
  delete static_cast<Event*>(event);
}

double elapsed_ms(const void* start, const void* end) {
  TORCH_CHECK(start != nullptr && end != nullptr,
              "neuron: both events must be recorded before elapsed_time()");
  const auto* a = static_cast<const Event*>(start);
  const auto* b = static_cast<const Event*>(end);
  return (static_cast<double>(b->time_ps) - static_cast<double>(a->time_ps)) / 1e9;
}

}  // namespace neuronsim::pytorch
