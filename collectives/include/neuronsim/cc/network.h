// The narrow network API the collective algorithms are written against.
//
// An algorithm may only: post a send, post a receive, ask the time, and schedule work later.
// Completions arrive as callbacks, so the same algorithm code runs on the in-process simulated
// fabric (fabric.h, time from the link model) and, later, on a TCP transport between processes
// (wall-clock time). The idea follows ASTRA-sim's AstraNetworkAPI (sim_send, sim_recv,
// sim_schedule, sim_get_time); nothing is copied from it. See docs/collectives.md.
#pragma once

#include <cstdint>
#include <functional>

namespace neuronsim::cc {

// Simulated time in integer picoseconds: deterministic, no floating-point drift.
using Picos = uint64_t;
inline constexpr Picos kPicosPerNs = 1000;
inline constexpr Picos kPicosPerUs = 1000 * kPicosPerNs;

using Callback = std::function<void()>;

class Network {
 public:
  virtual ~Network() = default;

  virtual int num_ranks() const = 0;
  virtual Picos now() const = 0;

  // Sends `bytes` from rank `src` to rank `dst`, matched at the receiver by (src, tag).
  // `data` may be null (timing only: the message has a size but no contents); otherwise the
  // bytes are captured when send() is called, so the caller may reuse its buffer at once.
  // `on_done` runs once the message has been delivered to `dst` (the sender's buffer is free).
  virtual void send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                    Callback on_done) = 0;

  // The same for data the sender combines on its way out: what it received in its previous step
  // reduced with its own, read, added and written to `dst` by one DMA operation (a reduce-scatter
  // step that feeds the next). A model of time moves it at the sender's reduction rate; a
  // transport that only carries data sends it as send() does.
  virtual void send_reduced(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
                            Callback on_done) {
    send(src, dst, data, bytes, tag, std::move(on_done));
  }

  // Posts a receive at rank `dst` for the message from `src` with `tag`. `buffer` may be null
  // (timing only); otherwise `bytes` are written there before `on_done` runs. Messages that
  // arrive before their receive is posted wait at the receiver. Sizes must match.
  virtual void recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag,
                    Callback on_done) = 0;

  // Runs `fn` `delay` picoseconds from now (0: after the callbacks already due now).
  virtual void schedule(Picos delay, Callback fn) = 0;

  // Drives the schedule until nothing is left to do; returns the time of the last event.
  virtual Picos run() = 0;
};

}  // namespace neuronsim::cc
