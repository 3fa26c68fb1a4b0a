// SBUF and PSUM occupancy of one core over a recorded run, as live bytes: data
// counts from the moment it is written until its last read before it is
// overwritten (never-read data does not count). The ISA has no allocation, so
// liveness from the records is the honest measure of on-chip memory pressure.
#pragma once

#include <cstdint>
#include <vector>

#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces::detail {

struct OccupancyStep {
  uint64_t ps = 0;
  uint64_t sbuf_bytes = 0;
  uint64_t psum_bytes = 0;
};

// The occupancy of `core` as a step function: a point wherever it changes, the
// first at time 0. Empty when the run has no instruction records for the core.
std::vector<OccupancyStep> live_occupancy(const sim::RunResult& run, uint32_t core);

}  // namespace neuronsim::traces::detail
