#include "trace_sessions.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::sim {
namespace {

// Appends `from` to `to`, shifted by `shift_ps`, while the event budgets last: the session's
// and its core's (`per_core`: the records each core has in `to`).
void append_records(RunResult& to, const RunResult& from, uint64_t shift_ps,
                    const TraceLimits& limits, std::map<uint32_t, uint64_t>& per_core,
                    uint64_t& dropped) {
  auto keep = [&](uint32_t core) {
    const uint64_t have = to.instructions.size() + to.dmas.size() + to.flows.size();
    uint64_t& of_core = per_core[core];
    if ((limits.max_events != 0 && have >= limits.max_events) ||
        (limits.max_events_per_core != 0 && of_core >= limits.max_events_per_core)) {
      ++dropped;
      return false;
    }
    ++of_core;
    return true;
  };
  for (InstructionRecord r : from.instructions) {
    if (!keep(r.core)) continue;
    r.start_ps += shift_ps;
    r.end_ps += shift_ps;
    to.instructions.push_back(r);
  }
  for (DmaRecord r : from.dmas) {
    if (!keep(r.core)) continue;
    r.start_ps += shift_ps;
    r.end_ps += shift_ps;
    to.dmas.push_back(r);
  }
  for (FlowRecord r : from.flows) {
    if (!keep(r.core)) continue;
    r.from_ps += shift_ps;
    r.to_ps += shift_ps;
    to.flows.push_back(r);
  }
}

// Sums the per-core totals of a window into the session's, core by core.
void add_stats(RunResult& to, const RunResult& from, uint64_t shift_ps) {
  for (size_t i = 0; i < from.cores.size(); ++i) {
    const uint32_t id = from.core_ids[i];
    auto it = std::find(to.core_ids.begin(), to.core_ids.end(), id);
    if (it == to.core_ids.end()) {
      to.core_ids.push_back(id);
      to.cores.emplace_back();
      it = to.core_ids.end() - 1;
    }
    CoreStats& s = to.cores[static_cast<size_t>(it - to.core_ids.begin())];
    const CoreStats& f = from.cores[i];
    s += f;
    s.end_ps = std::max(s.end_ps, f.end_ps + shift_ps);
  }
  to.total_ps = std::max(to.total_ps, from.total_ps + shift_ps);
}

}  // namespace

bool TraceSessions::Session::in_window(uint64_t start, uint64_t end) const {
  return !(limits.from_ps && end <= limits.from_ps) && !(limits.to_ps && start >= limits.to_ps);
}

uint64_t TraceSessions::start(TraceLimits limits) {
  const uint64_t id = next_++;
  Session& s = sessions_[id];
  s.programs.insert(limits.programs.begin(), limits.programs.end());
  s.limits = std::move(limits);
  return id;
}

TraceSession TraceSessions::stop(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end())
    throw std::invalid_argument(fmt::format("stop_trace: no trace session {}", id));
  TraceSession out = std::move(it->second.data);
  sessions_.erase(it);
  return out;
}

bool TraceSessions::records_any(const std::vector<Work*>& batch) const {
  return std::any_of(sessions_.begin(), sessions_.end(), [&](const auto& s) {
    return std::any_of(batch.begin(), batch.end(),
                       [&](Work* w) { return s.second.records(w->execution.program.get()); });
  });
}

// Sessions limited to some programs leave holds out.
void TraceSessions::record_hold(const Work& w, const Completion& c) {
  for (auto& [id, s] : sessions_) {
    if (!s.programs.empty() || !s.wants(w, c.start_ps, c.end_ps)) continue;
    s.data.result.executions.push_back({w.core, w.seq, w.copy.name, nullptr, c.start_ps, c.end_ps});
  }
}

void TraceSessions::record_execution(const Work& w, const Completion& c) {
  for (auto& [id, s] : sessions_) {
    if (!s.wants(w, c.start_ps, c.end_ps)) continue;
    TraceSession& d = s.data;
    const RunResult& r = *c.run;
    // A window with several executions is appended once (with its first one).
    if (s.last_window != c.run) {
      s.last_window = c.run;
      if (d.result.instance.empty()) {
        d.result.instance = r.instance;
        d.result.generation = r.generation;
        d.result.peak_flops_per_core = r.peak_flops_per_core;
        d.result.hbm_bytes_per_ns = r.hbm_bytes_per_ns;
        d.result.hbm_stacks = r.hbm_stacks;
      }
      append_records(d.result, r, r.start_ps, s.limits, s.core_events, d.dropped_events);
      add_stats(d.result, r, r.start_ps);
    }
    d.result.executions.push_back(
        {w.core, w.seq, w.execution.name.empty() ? w.execution.program->name() : w.execution.name,
         &w.execution.program->program(), c.start_ps, c.end_ps, c.launch_ps, c.host_bound_ps});
    if (std::find(d.programs.begin(), d.programs.end(), w.execution.program) == d.programs.end())
      d.programs.push_back(w.execution.program);
  }
}

// Sessions limited to some programs leave the host out.
void TraceSessions::record_host(const std::string& name, uint64_t start_ps, uint64_t end_ps) {
  for (auto& [id, s] : sessions_)
    if (s.programs.empty() && s.in_window(start_ps, end_ps))
      s.data.result.host.push_back({name, start_ps, end_ps});
}

}  // namespace neuronsim::sim
