#include "neuronsim/cc/runner.h"

#include <algorithm>
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
  res.algorithm = choose_on_fabric(fabric, spec, options, group);
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

namespace {

// The simulated time of `spec` by `algorithm` on a fresh fabric like `like` (no data).
Picos time_on(const Fabric& like, const CollectiveSpec& spec, Algorithm algorithm, int group) {
  Fabric f(like.instance(), like.params(), like.cores());
  const int R = f.num_ranks();
  std::vector<int> local;
  std::vector<RankPlan> plans;
  for (int r = 0; r < R; ++r) {
    local.push_back(r);
    plans.push_back(make_plan(spec, R, r, algorithm, group));
  }
  execute(f, spec, local, plans, nullptr);
  return f.now();
}

}  // namespace

Algorithm choose_on_fabric(const Fabric& fabric, const CollectiveSpec& spec,
                           const RunOptions& options, int group) {
  const int R = fabric.num_ranks();
  if (options.algorithm != Algorithm::auto_select ||
      !algorithm_supported(spec.op, Algorithm::hierarchical, R, group))
    return resolve_algorithm(spec, R, fabric.instance(), options, group);
  // Across hosts: the hierarchy pays a latency per step of its rings (all-reduce
  // 2(W-1) + 2(H-1), all-gather and reduce-scatter (W-1) + (H-1)) but
  // crosses EFA on every chip's share; the flat schedule (the one-host choice by size) the other
  // way round. Keep whichever the fabric model finds faster, so that times stay monotone in size
  // across the switch (on wide hosts the flat one wins up to a few MB).
  const Algorithm flat = choose_algorithm(
      spec, R, options.thresholds ? *options.thresholds : thresholds_for(fabric.instance()), 0);
  return time_on(fabric, spec, flat, group) < time_on(fabric, spec, Algorithm::hierarchical, group)
             ? flat
             : Algorithm::hierarchical;
}

std::vector<CollectiveResult> run_together(
    Fabric& fabric, const std::vector<CollectiveSpec>& specs,
    const std::vector<std::vector<std::vector<uint8_t>>>* inputs, const RunOptions& options) {
  const int R = fabric.num_ranks(), group = fabric.ranks_per_entry();
  if (inputs && inputs->size() != specs.size())
    throw std::invalid_argument(
        fmt::format("{} input sets for {} collectives", inputs->size(), specs.size()));
  std::vector<CollectiveResult> results(specs.size());
  std::vector<std::vector<RankPlan>> plans(specs.size());
  std::vector<std::vector<RankBuffers>> buffers(specs.size());
  std::vector<ExecutionJob> jobs;
  std::vector<int> local;
  for (int r = 0; r < R; ++r) local.push_back(r);
  for (size_t c = 0; c < specs.size(); ++c) {
    results[c].algorithm = choose_on_fabric(fabric, specs[c], options, group);
    for (int r = 0; r < R; ++r) {
      plans[c].push_back(make_plan(specs[c], R, r, results[c].algorithm, group));
      if (inputs)
        buffers[c].push_back(
            prepare_buffers(specs[c], R, r, (*inputs)[c].at(static_cast<size_t>(r))));
    }
    jobs.push_back({&specs[c], &plans[c], inputs ? &buffers[c] : nullptr});
  }
  const Picos start = fabric.now();
  const auto done = execute_together(fabric, local, jobs);
  for (size_t c = 0; c < specs.size(); ++c) {
    CollectiveResult& res = results[c];
    for (Picos t : done[c]) {
      res.rank_done_ps.push_back(t - start);
      res.duration_ps = std::max(res.duration_ps, t - start);
    }
    if (inputs)
      for (int r = 0; r < R; ++r)
        res.outputs.push_back(extract_output(specs[c], R, r, buffers[c][static_cast<size_t>(r)]));
  }
  return results;
}

CollectiveResult run_collective(const spec::InstanceConfig& inst, int ranks,
                                const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>& inputs,
                                const RunOptions& options) {
  Fabric fabric = Fabric::make(inst, ranks, options.placement, options.lnc);
  return run_collective(fabric, spec, &inputs, options);
}

CollectiveResult time_collective(const spec::InstanceConfig& inst, int ranks,
                                 const CollectiveSpec& spec, const RunOptions& options) {
  Fabric fabric = Fabric::make(inst, ranks, options.placement, options.lnc);
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
