#include "neuronsim/cc/communicator.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::cc {
namespace {

struct Timed {
  Algorithm algorithm;
  Picos base;
  std::vector<Picos> finish;
};

// Runs the plans of all ranks on a fresh fabric, rank r starting at arrivals[r]; with
// `buffers` the data moves too.
Timed run_on_fabric(const sim::InstanceConfig& inst, const CollectiveSpec& spec, const std::vector<Picos>& arrivals,
                    const RunOptions& options, std::vector<RankBuffers>* buffers) {
  const int R = static_cast<int>(arrivals.size());
  Fabric fabric = options.cores.empty()
                      ? Fabric::make(inst, R, options.placement)
                      : Fabric(inst, FabricParams::for_instance(inst, sim::load_generation(inst.generation)), options.cores);
  if (fabric.num_ranks() != R)
    throw std::invalid_argument(fmt::format("{} cores placed for {} ranks", fabric.num_ranks(), R));
  Timed t;
  t.algorithm = resolve_algorithm(spec, R, inst, options);
  t.base = *std::min_element(arrivals.begin(), arrivals.end());
  std::vector<int> ranks(static_cast<size_t>(R));
  std::iota(ranks.begin(), ranks.end(), 0);
  std::vector<RankPlan> plans;
  std::vector<Picos> starts;
  for (int r = 0; r < R; ++r) {
    plans.push_back(make_plan(spec, R, r, t.algorithm));
    starts.push_back(arrivals[static_cast<size_t>(r)] - t.base);
  }
  t.finish = execute(fabric, spec, ranks, plans, buffers, &starts);
  for (size_t r = 0; r < t.finish.size(); ++r) t.finish[r] = std::max(t.finish[r] + t.base, arrivals[r]);
  return t;
}

CollectiveOutcome outcome_of(const Timed& t) {
  CollectiveOutcome out;
  out.algorithm = t.algorithm;
  out.start_ps = t.base;
  out.end_ps = *std::max_element(t.finish.begin(), t.finish.end());
  out.finish_ps = t.finish;
  return out;
}

}  // namespace

CollectiveOutcome simulate_timing(const sim::InstanceConfig& inst, const CollectiveSpec& spec,
                                  const std::vector<Picos>& arrivals_ps, const RunOptions& options) {
  if (arrivals_ps.empty()) throw std::invalid_argument("simulate_timing: no ranks");
  return outcome_of(run_on_fabric(inst, spec, arrivals_ps, options, nullptr));
}

FabricCommunicator::FabricCommunicator(sim::InstanceConfig inst, int world_size, RunOptions options)
    : inst_(std::move(inst)), options_(options), ranks_(static_cast<size_t>(std::max(world_size, 0))) {
  if (world_size < 1) throw std::invalid_argument(fmt::format("world size {} (must be at least 1)", world_size));
  std::iota(ranks_.begin(), ranks_.end(), 0);
  if (options_.cores.empty())
    Fabric::make(inst_, world_size, options_.placement);  // fails now, not at the first collective
  else if (options_.cores.size() != ranks_.size())
    throw std::invalid_argument(fmt::format("{} cores placed for {} ranks", options_.cores.size(), world_size));
}

CollectiveOutcome FabricCommunicator::run(const CollectiveSpec& spec, std::vector<RankCall> calls, bool with_data) {
  const int R = world_size();
  if (calls.size() != ranks_.size())
    throw std::invalid_argument(fmt::format("{} collective calls for a world of {} ranks", calls.size(), R));
  std::vector<Picos> arrivals;
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < R; ++r) {
    const RankCall& c = calls[static_cast<size_t>(r)];
    if (c.rank != r) throw std::invalid_argument(fmt::format("collective call {} is for rank {}", r, c.rank));
    arrivals.push_back(c.arrival_ps);
    if (with_data) buffers.push_back(prepare_buffers(spec, R, r, c.input));
  }
  CollectiveOutcome out = outcome_of(run_on_fabric(inst_, spec, arrivals, options_, with_data ? &buffers : nullptr));
  if (with_data)
    for (int r = 0; r < R; ++r) out.outputs.push_back(extract_output(spec, R, r, buffers[static_cast<size_t>(r)]));
  return out;
}

}  // namespace neuronsim::cc
