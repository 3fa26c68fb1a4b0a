// The human-readable timing summary `neuron-sim run` prints: total simulated
// time, per core and engine busy time, utilisation and instruction counts, DMA
// traffic, achieved HBM bandwidth, FLOPs and MFU.
#pragma once

#include <string>

#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces {

// A multi-line table (ends with a newline); same figures as metrics_json().
std::string summary_table(const sim::RunResult& result);

}  // namespace neuronsim::traces
