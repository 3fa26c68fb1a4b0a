// A communicator: the ranks of one job and how their collectives run, whether every rank lives
// in this process (FabricCommunicator) or each process holds one rank (TcpCommunicator,
// tcp.h). The simulator calls it when a core reaches a collective instruction; cc-bench calls it
// directly. Either way the result is the same data and the same simulated times.
#pragma once

#include <cstdint>
#include <vector>

#include "neuronsim/cc/algorithms.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"

namespace neuronsim::cc {

// One local rank's part in a collective.
struct RankCall {
  int rank = 0;
  Picos arrival_ps = 0;        // simulated time at which the rank reached the collective
  std::vector<uint8_t> input;  // see CollectiveSpec; ignored when timing only
};

struct CollectiveOutcome {
  Algorithm algorithm = Algorithm::auto_select;  // the one that ran
  Picos start_ps = 0;                            // the first arrival of any rank
  Picos end_ps = 0;  // the last rank's finish; every rank of the job sees the same value
  std::vector<Picos> finish_ps;               // per local rank (absolute simulated time)
  std::vector<std::vector<uint8_t>> outputs;  // per local rank (empty when timing only)
  Picos duration_ps() const { return end_ps - start_ps; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int world_size() const = 0;
  // The ranks this process runs, ascending.
  virtual const std::vector<int>& local_ranks() const = 0;
  // Runs one collective; `calls[i]` is local_ranks()[i]'s part. Every rank of the job must call
  // with the same spec, in the same order of collectives. `with_data` false: timing only.
  virtual CollectiveOutcome run(const CollectiveSpec& spec, std::vector<RankCall> calls,
                                bool with_data) = 0;
};

// The simulated times of one collective whose ranks arrive at `arrivals_ps` (one per rank of
// the job): a fresh fabric, each rank starting at its own arrival. Every process of a job
// computes this the same way, so they agree without asking each other. Fills algorithm,
// start_ps, end_ps and finish_ps (for every rank, not only local ones).
CollectiveOutcome simulate_timing(const spec::InstanceConfig& inst, const CollectiveSpec& spec,
                                  const std::vector<Picos>& arrivals_ps, const RunOptions& options);

// Every rank in this process, on the simulated fabric of `inst`.
class FabricCommunicator final : public Communicator {
 public:
  FabricCommunicator(spec::InstanceConfig inst, int world_size, RunOptions options = {});
  int world_size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& local_ranks() const override { return ranks_; }
  CollectiveOutcome run(const CollectiveSpec& spec, std::vector<RankCall> calls,
                        bool with_data) override;

 private:
  spec::InstanceConfig inst_;
  RunOptions options_;
  std::vector<int> ranks_;
};

}  // namespace neuronsim::cc
