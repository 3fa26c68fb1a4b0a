// Which ops ran on the device, as TorchNeuron's op tracking lists them
// (torch_neuronx.get_executed_ops()): the ops the caller dispatched, by their aten names
// with and without the overload ("aten::where" and "aten::where.self"), whether or not
// they needed a kernel of their own.
//
// An op counts once the device did something for it, directly or through an op it called:
// ran a kernel, copied, allocated, or had its result read by the host. So a view
// (unsqueeze, a transpose) or an op made only of views (atleast_2d) is not listed, a
// factory (full, new_empty) and a composite (linear, cross_entropy_loss) are, and so are the
// ops they call on the way down (addmm under linear). What the backend's own kernels call
// inside themselves is theirs, not the caller's, and is not listed. An op any part of which
// ran on the CPU is a fallback (get_fallback_ops), not an executed op. Work with no op
// around it (a compiled graph, an NKI kernel called directly) is listed by its own name.
// Nothing is listed before start(): see there.
#pragma once

#include <string>
#include <vector>

namespace neuronsim::pytorch::op_tracking {

// Starts watching the dispatcher (later calls do nothing while it watches). Watching costs every
// op of the process, the CPU's included, a RecordFunction (about 0.7 us of host time, a fifth of
// a small CPU op), so it starts only when asked: torch_neuronx's op-tracking calls ask.
void start();
// Stops watching (the lists stay as they are).
void stop();
bool watching();
// The device did something for the ops being dispatched on this thread. `launched`, the
// work's own name, is listed instead when no op is being dispatched.
void device_works(const std::string& launched = {});
// The op being dispatched on this thread ran on the CPU.
void falls_back();
// The ops listed since the last clear, sorted, each once.
std::vector<std::string> executed();
void clear();

}  // namespace neuronsim::pytorch::op_tracking
