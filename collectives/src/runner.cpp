#include "neuronsim/cc/runner.h"

#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::cc {

CollectiveResult run_collective(Fabric& fabric, const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>* inputs,
                                const RunOptions& options, const std::vector<Picos>* starts) {
  const int R = fabric.num_ranks();
  if (inputs && inputs->size() != static_cast<size_t>(R))
    throw std::invalid_argument(fmt::format("{} inputs for {} ranks", inputs->size(), R));
  CollectiveResult res;
  const int group = fabric.ranks_per_entry();
  res.algorithm = resolve_algorithm(spec, R, fabric.instance(), options, group);
  std::vector<int> local;
  std::vector<RankPlan> plans;
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < R; ++r) {
    local.push_back(r);
    plans.push_back(make_plan(spec, R, r, res.algorithm, group));
    if (inputs) buffers.push_back(prepare_buffers(spec, R, r, (*inputs)[static_cast<size_t>(r)]));
  }
  const Picos start = fabric.now();
  const uint64_t sent = fabric.messages_sent();
  res.rank_done_ps = execute(fabric, spec, local, plans, inputs ? &buffers : nullptr, starts);
  for (auto& t : res.rank_done_ps) t -= start;
  res.duration_ps = fabric.now() - start;
  res.messages = fabric.messages_sent() - sent;
  if (inputs)
    for (int r = 0; r < R; ++r)
      res.outputs.push_back(extract_output(spec, R, r, buffers[static_cast<size_t>(r)]));
  return res;
}

CollectiveResult run_collective(const spec::InstanceConfig& inst, int ranks,
                                const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>& inputs,
                                const RunOptions& options) {
  Fabric fabric = Fabric::make(inst, ranks, options.placement);
  return run_collective(fabric, spec, &inputs, options);
}

CollectiveResult time_collective(const spec::InstanceConfig& inst, int ranks,
                                 const CollectiveSpec& spec, const RunOptions& options) {
  Fabric fabric = Fabric::make(inst, ranks, options.placement);
  return run_collective(fabric, spec, nullptr, options);
}

Thresholds thresholds_for(const spec::InstanceConfig& inst) {
  const spec::GenerationConfig& gen = generation_of(inst);
  return Thresholds{gen.cc_mesh_below_bytes, gen.cc_rdh_below_bytes};
}

Algorithm resolve_algorithm(const CollectiveSpec& spec, int ranks, const spec::InstanceConfig& inst,
                            const RunOptions& options, int group) {
  if (options.algorithm != Algorithm::auto_select) return options.algorithm;
  return choose_algorithm(spec, ranks,
                          options.thresholds ? *options.thresholds : thresholds_for(inst), group);
}

double bus_bandwidth_factor(Op op, int ranks) {
  const double r = ranks;
  switch (op) {
    case Op::all_reduce:
      return 2.0 * (r - 1) / r;
    case Op::all_gather:
    case Op::reduce_scatter:
    case Op::all_to_all:
    case Op::all_to_all_v:
      return (r - 1) / r;
    default:
      return 1.0;
  }
}

}  // namespace neuronsim::cc
