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
  std::vector<std::vector<uint8_t>> outputs;
};

// Runs every rank on a fresh fabric, rank r starting at arrivals[r]; with `inputs` the data
// moves too.
Timed run_on_fabric(const spec::InstanceConfig& inst, const CollectiveSpec& spec,
                    const std::vector<Picos>& arrivals, const RunOptions& options,
                    const std::vector<std::vector<uint8_t>>* inputs) {
  const int R = static_cast<int>(arrivals.size());
  Fabric fabric = options.cores.empty()
                      ? Fabric::make(inst, R, options.placement, options.lnc)
                      : Fabric(inst, FabricParams::for_instance(inst, options.lnc), options.cores);
  if (fabric.num_ranks() != R)
    throw std::invalid_argument(fmt::format("{} cores placed for {} ranks", fabric.num_ranks(), R));
  Timed t;
  t.base = *std::min_element(arrivals.begin(), arrivals.end());
  std::vector<Picos> starts;
  for (Picos a : arrivals) starts.push_back(a - t.base);
  CollectiveResult res = run_collective(fabric, spec, inputs, options, &starts);
  t.algorithm = res.algorithm;
  t.outputs = std::move(res.outputs);
  for (size_t r = 0; r < arrivals.size(); ++r)
    t.finish.push_back(std::max(res.rank_done_ps[r] + t.base, arrivals[r]));
  return t;
}

CollectiveOutcome outcome_of(Timed t) {
  CollectiveOutcome out;
  out.algorithm = t.algorithm;
  out.start_ps = t.base;
  out.end_ps = *std::max_element(t.finish.begin(), t.finish.end());
  out.finish_ps = std::move(t.finish);
  out.outputs = std::move(t.outputs);
  return out;
}

}  // namespace

CollectiveOutcome simulate_timing(const spec::InstanceConfig& inst, const CollectiveSpec& spec,
                                  const std::vector<Picos>& arrivals_ps,
                                  const RunOptions& options) {
  if (arrivals_ps.empty()) throw std::invalid_argument("simulate_timing: no ranks");
  return outcome_of(run_on_fabric(inst, spec, arrivals_ps, options, nullptr));
}

FabricCommunicator::FabricCommunicator(spec::InstanceConfig inst, int world_size,
                                       RunOptions options)
    : inst_(std::move(inst)),
      options_(options),
      ranks_(static_cast<size_t>(std::max(world_size, 0))) {
  if (world_size < 1)
    throw std::invalid_argument(fmt::format("world size {} (must be at least 1)", world_size));
  std::iota(ranks_.begin(), ranks_.end(), 0);
  if (!options_.runtime) options_.runtime = RuntimeCosts::load();  // read once, not per collective
  if (options_.cores.empty())
    Fabric::make(inst_, world_size, options_.placement,
                 options_.lnc);  // fails now, not at the first collective
  else if (options_.cores.size() != ranks_.size())
    throw std::invalid_argument(
        fmt::format("{} cores placed for {} ranks", options_.cores.size(), world_size));
}

CollectiveOutcome FabricCommunicator::run(const CollectiveSpec& spec, std::vector<RankCall> calls,
                                          bool with_data) {
  const int R = world_size();
  if (calls.size() != ranks_.size())
    throw std::invalid_argument(
        fmt::format("{} collective calls for a world of {} ranks", calls.size(), R));
  std::vector<Picos> arrivals;
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < R; ++r) {
    RankCall& c = calls[static_cast<size_t>(r)];
    if (c.rank != r)
      throw std::invalid_argument(fmt::format("collective call {} is for rank {}", r, c.rank));
    arrivals.push_back(c.arrival_ps);
    inputs.push_back(std::move(c.input));
  }
  return outcome_of(run_on_fabric(inst_, spec, arrivals, options_, with_data ? &inputs : nullptr));
}

}  // namespace neuronsim::cc
