#include "neuronsim/cc/runner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace neuronsim::cc {

namespace {

Picos ns_to_ps(double ns) {
  return static_cast<Picos>(std::llround(ns * static_cast<double>(kPicosPerNs)));
}

// The options with the runtime release read, so that it is read once per collective.
RunOptions with_runtime(const RunOptions& options) {
  RunOptions o = options;
  if (!o.runtime) o.runtime = RuntimeCosts::load();
  return o;
}

// The runtime's cost at the start of a collective on `fabric`.
Picos runtime_start_ps(const Fabric& fabric, const RuntimeCosts& rt) {
  const bool across_hosts = fabric.instances() > fabric.instance().instances;
  return rt.fixed_ps + (across_hosts ? rt.across_hosts_ps : 0);
}

ExecutionCosts execution_costs(const Fabric& fabric) {
  return ExecutionCosts{fabric.params().reduce_bytes_per_s};
}

}  // namespace

RuntimeCosts RuntimeCosts::none() {
  RuntimeCosts c;
  c.release = "none";
  return c;
}

RuntimeCosts RuntimeCosts::of(const spec::RuntimeRelease& release) {
  RuntimeCosts c;
  c.release = release.name;
  c.fixed_ps = ns_to_ps(release.collective_fixed_ns);
  c.across_hosts_ps = ns_to_ps(release.across_hosts_fixed_ns);
  c.mesh = release.has_algorithm("mesh");
  c.rdh = release.has_algorithm("rdh");
  c.hierarchical = release.has_algorithm("hierarchical");
  return c;
}

RuntimeCosts RuntimeCosts::load(const std::string& release) {
  if (release == "none") return none();
  // Read once per configs and release: a job (the PyTorch backend's symmetric ranks) may time
  // thousands of collectives.
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, RuntimeCosts> read;
  const auto key = std::make_pair(spec::config_dir().string(), release);
  std::lock_guard lock(mu);
  if (const auto it = read.find(key); it != read.end()) return it->second;
  const RuntimeCosts costs = of(spec::load_runtime_release(release));
  read.emplace(key, costs);
  return costs;
}

RuntimeCosts runtime_costs(const RunOptions& options) {
  return options.runtime ? *options.runtime : RuntimeCosts::load();
}

CollectiveResult run_collective(Fabric& fabric, const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>* inputs,
                                const RunOptions& run_options, const std::vector<Picos>* starts) {
  const int R = fabric.num_ranks();
  if (inputs && inputs->size() != static_cast<size_t>(R))
    throw std::invalid_argument(fmt::format("{} inputs for {} ranks", inputs->size(), R));
  if (starts && starts->size() != static_cast<size_t>(R))
    throw std::invalid_argument(fmt::format("{} start times for {} ranks", starts->size(), R));
  const RunOptions options = with_runtime(run_options);
  CollectiveResult res;
  const int group = fabric.ranks_per_entry();
  res.algorithm = choose_on_fabric(fabric, spec, options, group);
  std::vector<int> local;
  std::vector<RankPlan> plans;
  std::vector<RankBuffers> buffers;
  // Every rank's first step waits for the runtime's cost of the collective.
  const Picos runtime_ps = runtime_start_ps(fabric, *options.runtime);
  std::vector<Picos> begin;
  for (int r = 0; r < R; ++r) {
    local.push_back(r);
    plans.push_back(make_plan(spec, R, r, res.algorithm, group));
    if (inputs) buffers.push_back(prepare_buffers(spec, R, r, (*inputs)[static_cast<size_t>(r)]));
    begin.push_back((starts ? (*starts)[static_cast<size_t>(r)] : 0) + runtime_ps);
  }
  const Picos start = fabric.now();
  const uint64_t sent = fabric.messages_sent();
  res.rank_done_ps = execute(fabric, spec, local, plans, inputs ? &buffers : nullptr, &begin,
                             execution_costs(fabric));
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
  execute(f, spec, local, plans, nullptr, nullptr, execution_costs(f));
  return f.now();
}

}  // namespace

Algorithm choose_on_fabric(const Fabric& fabric, const CollectiveSpec& spec,
                           const RunOptions& run_options, int group) {
  const int R = fabric.num_ranks();
  const RunOptions options = with_runtime(run_options);
  if (options.algorithm != Algorithm::auto_select || !options.runtime->hierarchical ||
      !algorithm_supported(spec.op, Algorithm::hierarchical, R, group))
    return resolve_algorithm(spec, R, fabric.instance(), options, group);
  // Across hosts: the hierarchy pays a latency per step of its rings (all-reduce
  // 2(W-1) + 2(H-1), all-gather and reduce-scatter (W-1) + (H-1)) but
  // crosses EFA on every chip's share; the flat schedule (the one-host choice by size) the other
  // way round. Keep whichever the fabric model finds faster, so that times stay monotone in size
  // across the switch (on wide hosts the flat one wins up to a few MB).
  const Algorithm flat = choose_algorithm(
      spec, R,
      thresholds_for(options.thresholds ? *options.thresholds : thresholds_for(fabric.instance()),
                     *options.runtime),
      0);
  return time_on(fabric, spec, flat, group) < time_on(fabric, spec, Algorithm::hierarchical, group)
             ? flat
             : Algorithm::hierarchical;
}

std::vector<CollectiveResult> run_together(
    Fabric& fabric, const std::vector<CollectiveSpec>& specs,
    const std::vector<std::vector<std::vector<uint8_t>>>* inputs, const RunOptions& run_options) {
  const RunOptions options = with_runtime(run_options);
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
    // Each collective on its own CC core (nccom-test's streams): each pays the runtime's cost.
    jobs.push_back({&specs[c], &plans[c], inputs ? &buffers[c] : nullptr,
                    runtime_start_ps(fabric, *options.runtime), execution_costs(fabric)});
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

Thresholds thresholds_for(Thresholds t, const RuntimeCosts& runtime) {
  if (!runtime.rdh) t.rdh_below_bytes = runtime.mesh ? t.mesh_below_bytes : 0;
  if (!runtime.mesh) t.mesh_below_bytes = 0;
  return t;
}

Algorithm resolve_algorithm(const CollectiveSpec& spec, int ranks, const spec::InstanceConfig& inst,
                            const RunOptions& options, int group) {
  if (options.algorithm != Algorithm::auto_select) return options.algorithm;
  const RuntimeCosts runtime = runtime_costs(options);
  return choose_algorithm(
      spec, ranks,
      thresholds_for(options.thresholds ? *options.thresholds : thresholds_for(inst), runtime),
      runtime.hierarchical ? group : 0);
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
