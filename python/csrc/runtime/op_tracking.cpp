// The dispatcher's RecordFunction callbacks open a frame per op on the dispatching thread;
// the backend marks the frames it works for; a frame closing marked lists its op.
#include "runtime/op_tracking.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace neuronsim::pytorch::op_tracking {
namespace {

struct Frame {
  bool internal = false;   // dispatched from inside a backend kernel: not the caller's op
  bool kernel = false;     // the op has a kernel of the backend's own (not a composite)
  bool touched = false;    // the device did something for it
  bool fell_back = false;  // some of it ran on the CPU
};

thread_local std::vector<Frame> t_frames;

std::mutex g_mu;  // guards g_executed
std::set<std::string> g_executed;

void list(const std::string& name) {
  std::lock_guard lock(g_mu);
  g_executed.insert(name);
}

// Whether the op has a kernel registered for PrivateUse1 itself: one of the backend's, whose
// inner ops are its own business. A composite (CompositeExplicitAutograd's _to_copy, an
// implicit linear) has none: its inner ops are what the caller's op became, and are listed.
bool backend_kernel(const at::RecordFunction& fn) {
  const auto op = fn.operator_name();
  if (!op) return false;
  thread_local std::unordered_map<c10::OperatorName, bool> known;
  const auto it = known.find(*op);
  if (it != known.end()) return it->second;
  const auto handle = c10::Dispatcher::singleton().findOp(*op);
  const bool ours = handle && handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
  known.emplace(*op, ours);
  return ours;
}

std::unique_ptr<at::ObserverContext> open_frame(const at::RecordFunction& fn) {
  // Below the autograd keys, inside one of the backend's kernels, means the kernel's own
  // work: the autograd kernels step below them before they call the backend's. Inference
  // mode steps below them too, so a composite's inner ops are told apart by their parent.
  const bool below_autograd =
      c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::AutogradFunctionality);
  const bool internal =
      !t_frames.empty() && (t_frames.back().internal || (below_autograd && t_frames.back().kernel));
  t_frames.push_back(Frame{internal, !internal && backend_kernel(fn)});
  return nullptr;
}

void close_frame(const at::RecordFunction& fn, at::ObserverContext*) {
  if (t_frames.empty()) return;  // opened before start()
  const Frame frame = t_frames.back();
  t_frames.pop_back();
  if (!t_frames.empty()) {
    t_frames.back().touched |= frame.touched;
    t_frames.back().fell_back |= frame.fell_back;
  }
  if (frame.internal || !frame.touched || frame.fell_back) return;
  const auto op = fn.operator_name();  // none: not an op (the autograd engine's own frames)
  if (!op) return;
  list(op->name);
  if (!op->overload_name.empty()) list(op->name + "." + op->overload_name);
}

std::mutex g_watch_mu;  // guards g_watch
std::optional<at::CallbackHandle> g_watch;
std::atomic<bool> g_on{false};  // g_watch is set: cheap to ask on every kernel

}  // namespace

void start() {
  std::lock_guard lock(g_watch_mu);
  if (!g_watch)
    g_watch = at::addGlobalCallback(
        at::RecordFunctionCallback(&open_frame, &close_frame).scopes({at::RecordScope::FUNCTION}));
  g_on = true;
}

void stop() {
  std::lock_guard lock(g_watch_mu);
  if (g_watch) at::removeCallback(*g_watch);
  g_watch.reset();
  g_on = false;
}

bool watching() {
  return g_on;
}

void device_works(const std::string& launched) {
  if (!g_on) return;
  if (!t_frames.empty())
    t_frames.back().touched = true;
  else if (!launched.empty())
    list(launched);
}

void falls_back() {
  if (!t_frames.empty()) t_frames.back().fell_back = true;
}

std::vector<std::string> executed() {
  std::lock_guard lock(g_mu);
  return {g_executed.begin(), g_executed.end()};
}

void clear() {
  std::lock_guard lock(g_mu);
  g_executed.clear();
}

}  // namespace neuronsim::pytorch::op_tracking
