// A device's trace sessions: each keeps the windows, executions, holds and host work that fall
// within its limits, on one time axis, until it stops. Not thread-safe: the device guards it
// with its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "neuronsim/sim/device.h"
#include "work_queue.h"

namespace neuronsim::sim {

class TraceSessions {
 public:
  uint64_t start(TraceLimits limits);
  bool has(uint64_t id) const { return sessions_.count(id) != 0; }
  // What session `id` kept; it ends. Throws std::invalid_argument when there is no such session.
  TraceSession stop(uint64_t id);

  // Whether any session records an execution of the batch (its window is then recorded).
  bool records_any(const std::vector<Work*>& batch) const;
  // An execution that is done, and its window once.
  void record_execution(const Work& w, const Completion& c);
  // A hold, a slice of its own on the core's row (the collective beside the kernels).
  void record_hold(const Work& w, const Completion& c);
  // The host's own work from start_ps to end_ps.
  void record_host(const std::string& name, uint64_t start_ps, uint64_t end_ps);

 private:
  struct Session {
    TraceLimits limits;
    TraceSession data;
    std::set<const LoadedProgram*> programs;
    std::map<uint32_t, uint64_t> core_events;  // the records kept of each core
    std::shared_ptr<const RunResult> last_window;
    bool records(const LoadedProgram* p) const { return programs.empty() || programs.count(p); }
    bool in_window(uint64_t start, uint64_t end) const;
    bool wants(const Work& w, uint64_t start, uint64_t end) const {
      return in_window(start, end) && records(w.execution.program.get());
    }
  };
  std::map<uint64_t, Session> sessions_;
  uint64_t next_ = 1;
};

}  // namespace neuronsim::sim
