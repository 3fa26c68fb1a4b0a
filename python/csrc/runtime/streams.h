// Streams and events of "neuron" devices.
//
// Every stream of a device is the device's core queue: kernels run in the order they
// are issued (each completes before the call returns), which is a valid schedule for
// any set of streams. A stream is only an id, current per thread and device. An event
// records the device clock when it is recorded, so that Event.elapsed_time() gives
// simulated milliseconds.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace neuronsim::pytorch {

// The id of the calling thread's current stream on a device (0, the default stream, at first).
c10::StreamId current_stream_id(c10::DeviceIndex index);
void set_current_stream_id(c10::DeviceIndex index, c10::StreamId id);
// A stream id not handed out before.
c10::StreamId new_stream_id();

// Records the device clock into *event (created on first record) for a stream of `index`.
void record_event(void** event, c10::DeviceIndex index);
void destroy_event(void* event) noexcept;
// Simulated milliseconds from `start` to `end`; both must have been recorded.
double elapsed_ms(const void* start, const void* end);

}  // namespace neuronsim::pytorch
