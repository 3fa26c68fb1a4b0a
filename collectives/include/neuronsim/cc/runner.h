// The in-process runner: every rank of a collective in one process, on the simulated fabric.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuronsim/cc/algorithms.h"
#include "neuronsim/cc/fabric.h"

namespace neuronsim::cc {

// What the runtime's collectives library adds to a collective besides moving its data, for one
// of its releases (spec/configs/runtime-releases.json, every figure with its source;
// docs/collectives.md, "Runtime releases"): a fixed cost per collective from its start, more
// for one whose ranks span hosts joined only by EFA, and the algorithms its automatic choice has.
struct RuntimeCosts {
  std::string release;        // the Neuron SDK release ("2.24"); "none" for none()
  Picos fixed_ps = 0;         // every collective
  Picos across_hosts_ps = 0;  // more, when its ranks span hosts joined only by EFA
  bool mesh = true;           // the automatic choice may pick mesh,
  bool rdh = true;            // recursive halving-doubling,
  bool hierarchical = true;   // and the hierarchy across hosts (ring it always may)

  // No runtime: the fabric model alone, every algorithm (what the model gave before releases).
  static RuntimeCosts none();
  static RuntimeCosts of(const spec::RuntimeRelease& release);
  // A release of the configs (spec::load_runtime_release; "" the newest, "none" none()), read
  // once per config directory and release. Throws spec::ConfigError for an unknown release.
  static RuntimeCosts load(const std::string& release = "");
};

struct RunOptions {
  Algorithm algorithm = Algorithm::auto_select;
  std::optional<Thresholds> thresholds;  // default: the instance generation's (thresholds_for)
  Placement placement = Placement::packed;
  std::vector<CoreId> cores;  // explicit placement (core of each rank); overrides `placement`
  int lnc = 1;                // physical cores per rank (logical NeuronCore size, Trn2: 1 or 2)
  // The runtime release; unset: the newest of the configs (RuntimeCosts::load()).
  std::optional<RuntimeCosts> runtime;
};

// options.runtime, or the newest release of the configs.
RuntimeCosts runtime_costs(const RunOptions& options);

struct CollectiveResult {
  std::vector<std::vector<uint8_t>> outputs;     // per rank (empty in timing-only runs)
  Picos duration_ps = 0;                         // simulated time from start to the last delivery
  Algorithm algorithm = Algorithm::auto_select;  // the one that ran
  uint64_t messages = 0;
  std::vector<Picos> rank_done_ps;  // when each rank finished (from the start)
  double seconds() const { return static_cast<double>(duration_ps) * 1e-12; }
};

// Runs `spec` on `ranks` ranks of `inst`; `inputs[r]` is rank r's input (see CollectiveSpec).
// Every collective starts with its runtime cost (options.runtime: fixed, and across hosts more),
// and each rank's reductions take its DMA engines' time (FabricParams::reduce_bytes_per_s).
CollectiveResult run_collective(const spec::InstanceConfig& inst, int ranks,
                                const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>& inputs,
                                const RunOptions& options = {});
// Timing only: the same messages, sizes and schedule, no data (for sizes too large to hold).
CollectiveResult time_collective(const spec::InstanceConfig& inst, int ranks,
                                 const CollectiveSpec& spec, const RunOptions& options = {});
// The same two on a fabric the caller made (its own figures or placement); the fabric must be
// fresh. `starts`, when given, delays rank r's first step by starts[r] (ranks arriving at different
// times).
CollectiveResult run_collective(Fabric& fabric, const CollectiveSpec& spec,
                                const std::vector<std::vector<uint8_t>>* inputs,
                                const RunOptions& options = {},
                                const std::vector<Picos>* starts = nullptr);

// Several collectives issued at once on one fabric (as nccom-test's streams run them): they
// contend for its links and DMA engines, unlike collectives run one by one on fresh fabrics.
// `inputs` (per collective, per rank) may be null for time only. Each result's duration is from
// the common start to that collective's last delivery.
std::vector<CollectiveResult> run_together(
    Fabric& fabric, const std::vector<CollectiveSpec>& specs,
    const std::vector<std::vector<std::vector<uint8_t>>>* inputs, const RunOptions& options);

// The automatic choice's thresholds of the instance's generation (spec/configs/<gen>.json, as it
// came with the instance: generation_of).
Thresholds thresholds_for(const spec::InstanceConfig& inst);
// The thresholds left of `t` for a runtime release without mesh (its band goes to RDH or ring)
// or without RDH (its band goes to ring).
Thresholds thresholds_for(Thresholds t, const RuntimeCosts& runtime);
// The algorithm that runs: options.algorithm, or the automatic choice with options.thresholds
// (the generation's when unset) and the algorithms of the runtime release; `group` is
// Fabric::ranks_per_entry() of the job.
Algorithm resolve_algorithm(const CollectiveSpec& spec, int ranks, const spec::InstanceConfig& inst,
                            const RunOptions& options, int group = 0);

// The algorithm that runs on `fabric` (group: its ranks_per_entry()): resolve_algorithm's, except
// for an automatic all_reduce across hosts, which is the faster on the fabric model of the
// hierarchical one and the one-host choice by size.
Algorithm choose_on_fabric(const Fabric& fabric, const CollectiveSpec& spec,
                           const RunOptions& options, int group);

// nccom-test's bus bandwidth: bytes / time × factor (all-reduce 2(r-1)/r; all-gather,
// reduce-scatter, all-to-all (r-1)/r; others 1) [neuron-hardware.md §5, C NCCOM].
double bus_bandwidth_factor(Op op, int ranks);

}  // namespace neuronsim::cc
