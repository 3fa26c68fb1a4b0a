// neuron-profile's summary: the JSON that `neuron-profile view --output-format summary-json`
// prints, filled from a simulated run, so that scripts written for the real profiler read a
// simulated run unchanged. Same field names and units: times in seconds, bytes, FLOPs, and
// the *_percent fields as fractions of 1, as the real output has them. Fields the simulation
// cannot fill are absent, never invented. docs/traces.md maps every field.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces {

struct ProfileSummaryOptions {
  // Each core's summary is keyed "<session>_nc<core>", as the real tool keys its profiling
  // sessions (readers take the first value).
  std::string session = "neuronsim";
};

// One object per core that ran. Figures that need the run's records (the union of active
// intervals, instruction counts by opcode) are there only when the run was recorded.
nlohmann::json profile_summary_json(const sim::RunResult& result,
                                    const ProfileSummaryOptions& options = {});

// Writes profile_summary_json() to `path`. Throws std::runtime_error naming the path when
// it cannot be written.
void write_profile_summary_json(const sim::RunResult& result, const ProfileSummaryOptions& options,
                                const std::filesystem::path& path);

}  // namespace neuronsim::traces
