// Machine-readable metrics of a run, for regression gates and dashboards:
// {"metrics": [{"name", "unit", "value"}, ...], "details": {...}}. The list has
// github-action-benchmark's custom shape; names follow Neuron Explorer's
// Summary table where it has one (total_time, *_engine_active_time_percent,
// hbm_read_bytes, mfu_estimated_percent). docs/traces.md gives every formula.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces {

struct MetricsOptions {
  // Benchmark name: with "matmul_512" the metric total_time_ns is named
  // "matmul_512/total_time_ns". Empty: names as they are.
  std::string prefix;
};

// The metrics list covers the whole run (all cores summed); details break it
// down per core and, when the run was recorded, per opcode and DMA queue.
nlohmann::json metrics_json(const sim::RunResult& result, const MetricsOptions& options = {});

// Writes metrics_json() to `path` (indented). Throws std::runtime_error naming
// the path when it cannot be written.
void write_metrics_json(const sim::RunResult& result, const MetricsOptions& options,
                        const std::filesystem::path& path);

}  // namespace neuronsim::traces
