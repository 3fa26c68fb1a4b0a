// Collective instructions inside one simulated run (internal to sim/). The hub
// matches what the bound cores reach: the k-th group collective of every local
// rank forms one round, and the k-th send from rank a to rank b pairs with the
// k-th recv on b from a. When a round is complete the communicator runs it once
// and each rank learns its output and its finish time. The hub knows nothing of
// SystemC: the timed engines and the functional scheduler both drive it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "neuronsim/cc/algorithms.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/functional.h"
#include "neuronsim/sim/types.h"

namespace neuronsim::sim {

// Where a collective instruction sits, for messages.
struct CollectiveSite {
  uint32_t core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;
  const isa::Program* program = nullptr;
  const isa::Instruction& inst() const { return program->stream(engine)[index]; }
  std::string describe() const;  // core 1 sp[3] `sp all_reduce ...`
};

// One rank's collective once its round has run.
struct CollectiveDone {
  bool done = false;
  uint64_t finish_ps = 0;       // run-relative simulated time
  std::vector<uint8_t> output;  // dst's new bytes (empty when timing only, and for send)
};

class CollectiveHub {
 public:
  // Checks the binding against the cores that have a program (std::invalid_argument).
  CollectiveHub(const CollectiveBinding& binding, const std::set<uint32_t>& loaded, bool with_data);

  // An engine reached a collective at run-relative time `arrival_ps`: reads its src
  // (through `state`; null when timing only) and, when this completes a round, runs
  // it. Throws ExecError naming the site for a core outside the job or a bad
  // instruction.
  std::shared_ptr<const CollectiveDone> arrive(const CollectiveSite& site, CoreState* state,
                                               uint64_t arrival_ps);
  // Writes a finished collective's dst (nothing when timing only).
  void finish(const CollectiveSite& site, CoreState* state, const CollectiveDone& done);
  // What an engine that arrived still waits for (deadlock reports).
  std::string waiting(uint32_t core, isa::Engine engine) const;

 private:
  struct Part {
    CollectiveSite site;
    cc::CollectiveSpec spec;
    std::vector<uint8_t> input;
    uint64_t arrival_ps = 0;
    std::shared_ptr<CollectiveDone> done;
  };
  struct Round {
    std::vector<std::optional<Part>> parts;  // by position in local_ranks()
    size_t arrived = 0;
  };
  struct PairQueue {
    std::deque<Part> sends, recvs;
  };
  // What an engine that arrived waits for: a group round, or a (src, dst) pair.
  struct Wait {
    bool p2p = false;
    uint64_t round = 0;
    std::pair<int, int> pair;
  };

  int rank_of(const CollectiveSite& site) const;
  void arrive_group(Part part, int rank);
  void arrive_p2p(Part part, int rank);
  void run_round(uint64_t k);
  void run_pair(std::pair<int, int> key);
  std::string rank_name(int rank) const;

  cc::Communicator* comm_ = nullptr;
  bool with_data_ = false;
  std::map<uint32_t, int> rank_of_core_;
  std::map<int, uint32_t> core_of_rank_;
  std::map<int, size_t> slot_of_rank_;  // position in local_ranks()
  std::map<int, uint64_t> next_round_;  // per rank: how many group collectives it reached
  std::map<uint64_t, Round> rounds_;
  std::map<std::pair<int, int>, PairQueue> pairs_;
  std::map<std::pair<uint32_t, isa::Engine>, Wait> waits_;
};

}  // namespace neuronsim::sim
