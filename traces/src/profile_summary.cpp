#include "neuronsim/traces/profile_summary.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "derived.h"
#include "neuronsim/traces/names.h"

namespace neuronsim::traces {
namespace {

using nlohmann::json;

double seconds(uint64_t ps) {
  return static_cast<double>(ps) * 1e-12;
}

// part / whole as neuron-profile's summary-json writes its "percent" fields: a fraction.
double fraction(double part, double whole) {
  return whole > 0 ? part / whole : 0.0;
}

// The length of the union of [start, end) intervals.
uint64_t union_ps(std::vector<std::pair<uint64_t, uint64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  uint64_t total = 0, reached = 0;
  for (const auto& [start, end] : spans) {
    const uint64_t from = std::max(start, reached);
    if (end > from) total += end - from;
    reached = std::max(reached, end);
  }
  return total;
}

// The figures only a recorded run has: the union of the core's active intervals, its DMA
// activity, and instruction counts by opcode.
void add_recorded(const sim::RunResult& r, uint32_t core, double total_s, json& out) {
  std::vector<std::pair<uint64_t, uint64_t>> all, dma;
  uint64_t matmuls = 0, activates = 0, activate_ps = 0;
  for (const sim::InstructionRecord& rec : r.instructions) {
    if (rec.core != core) continue;
    all.emplace_back(rec.start_ps, rec.end_ps);
    if (rec.inst == nullptr) continue;
    if (rec.inst->opcode == isa::Opcode::matmul) ++matmuls;
    if (rec.inst->opcode == isa::Opcode::activation) {
      ++activates;
      activate_ps += rec.end_ps - rec.start_ps;
    }
  }
  for (const sim::DmaRecord& d : r.dmas)
    if (d.core == core) {
      all.emplace_back(d.start_ps, d.end_ps);
      dma.emplace_back(d.start_ps, d.end_ps);
    }
  const double active = seconds(union_ps(std::move(all)));
  const double dma_active = seconds(union_ps(std::move(dma)));
  out["total_active_time"] = active;
  out["total_active_time_percent"] = fraction(active, total_s);
  out["dma_active_time"] = dma_active;
  out["dma_active_time_percent"] = fraction(dma_active, total_s);
  out["matmul_instruction_count"] = matmuls;
  out["activate_instruction_count"] = activates;
  out["activate_instruction_time"] = seconds(activate_ps);
}

// The core's holds (executions without a program: collectives whose data moves outside the
// simulator) and how much of them no kernel of the core ran beside: the exposed part, which
// the step waits for (|holds U kernels| - |kernels|).
void add_collectives(const sim::RunResult& r, uint32_t core, json& out) {
  std::vector<std::pair<uint64_t, uint64_t>> holds, kernels;
  for (const sim::ExecutionRecord& e : r.executions)
    if (e.core == core) (e.program == nullptr ? holds : kernels).push_back({e.start_ps, e.end_ps});
  if (holds.empty()) return;
  const uint64_t kernel_ps = union_ps(kernels);
  kernels.insert(kernels.end(), holds.begin(), holds.end());
  out["collective_time"] = seconds(union_ps(std::move(holds)));
  out["collective_exposed_time"] = seconds(union_ps(std::move(kernels)) - kernel_ps);
}

json core_summary(const sim::RunResult& r, size_t i) {
  const sim::CoreStats& c = r.cores[i];
  const uint32_t core = detail::core_id(r, i);
  // The device's execution: from the start of the core's first execution (a trace session's
  // records are on the device clock, which earlier work had already advanced) to its end,
  // less the runtime's launches.
  uint64_t first_ps = c.end_ps;
  for (const sim::ExecutionRecord& e : r.executions)
    if (e.core == core) first_ps = std::min(first_ps, e.start_ps);
  if (first_ps == c.end_ps) first_ps = 0;  // no execution records: a run of its own, from 0
  const uint64_t span_ps = c.end_ps - first_ps;
  const uint64_t total_ps = span_ps > c.launch_ps ? span_ps - c.launch_ps : 0;
  const double total = seconds(total_ps);
  json out = {{"total_time", total}, {"instance_type", r.instance}, {"nc_idx", core}};
  out["launch_time"] = seconds(c.launch_ps);  // the runtime's launches, which total_time omits
  // The host's dispatch of the ops (all cores'), and how long this core sat ready for it.
  uint64_t host_ps = 0, host_bound_ps = 0;
  for (const sim::HostRecord& h : r.host) host_ps += h.end_ps - h.start_ps;
  for (const sim::ExecutionRecord& e : r.executions)
    if (e.core == core) host_bound_ps += e.host_bound_ps;
  out["host_dispatch_time"] = seconds(host_ps);
  out["host_bound_time"] = seconds(host_bound_ps);
  add_collectives(r, core, out);
  for (isa::Engine e : detail::kEngineOrder) {
    const sim::EngineStats& s = c.engines[static_cast<size_t>(e)];
    const std::string n = fmt::format("{}_engine", engine_metric_name(e));
    // An engine runs its instructions one at a time: their summed and united times agree.
    out[n + "_active_time"] = seconds(s.busy_ps);
    out[n + "_active_time_percent"] = fraction(seconds(s.busy_ps), total);
    out[n + "_instruction_time"] = seconds(s.busy_ps);
    out[n + "_instruction_count"] = s.instructions;
  }
  out["dma_packet_time"] = seconds(c.dma_busy_ps);
  out["hbm_read_bytes"] = c.hbm_read_bytes;
  out["hbm_write_bytes"] = c.hbm_write_bytes;
  const uint64_t hbm = c.hbm_read_bytes + c.hbm_write_bytes;
  if (r.hbm_stacks > 0 && r.hbm_bytes_per_ns > 0) {  // the per-stack bandwidth, as the tool
    const double stack_bytes_per_s = r.hbm_bytes_per_ns * 1e9 / r.hbm_stacks;
    if (total > 0)
      out["mbu_estimated_percent"] = fraction(static_cast<double>(hbm) / total, stack_bytes_per_s);
    out["peak_flops_bandwidth_ratio"] = r.peak_flops_per_core / stack_bytes_per_s;
  }
  // TensorE's FLOPs without its transposes: what neuron-profile calls the model's.
  out["model_flops"] = c.matmul_flops;
  out["mfu_estimated_percent"] = fraction(static_cast<double>(c.matmul_flops),
                                          r.peak_flops_per_core * c.physical_cores * total);
  out["mm_arithmetic_intensity"] =
      fraction(static_cast<double>(c.matmul_flops), static_cast<double>(hbm));
  if (!r.instructions.empty() || !r.dmas.empty()) add_recorded(r, core, total, out);
  return out;
}

}  // namespace

json profile_summary_json(const sim::RunResult& r, const ProfileSummaryOptions& options) {
  json out = json::object();
  for (size_t i = 0; i < r.cores.size(); ++i)
    out[fmt::format("{}_nc{}", options.session, detail::core_id(r, i))] = core_summary(r, i);
  return out;
}

void write_profile_summary_json(const sim::RunResult& result, const ProfileSummaryOptions& options,
                                const std::filesystem::path& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
  out << profile_summary_json(result, options).dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

}  // namespace neuronsim::traces
