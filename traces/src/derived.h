// Figures derived from a RunResult that the metrics, the summary and the trace
// share, so that all three print the same numbers. Internal to traces/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces::detail {

// Engines in row order: Tensor, Vector, Scalar, GpSimd, Sync.
inline constexpr std::array<isa::Engine, isa::kNumEngines> kEngineOrder = {
    isa::Engine::PE, isa::Engine::DVE, isa::Engine::ACT, isa::Engine::POOL, isa::Engine::SP};

// Instance-wide id of result.cores[i] (i itself when core_ids is not filled).
inline uint32_t core_id(const sim::RunResult& r, size_t i) {
  return i < r.core_ids.size() ? r.core_ids[i] : static_cast<uint32_t>(i);
}

inline double ps_to_ns(uint64_t ps) {
  return static_cast<double>(ps) / 1e3;
}
inline double ps_to_us(uint64_t ps) {
  return static_cast<double>(ps) / 1e6;
}

// 100 * part / whole, 0 when whole is 0 (never NaN: JSON has no NaN).
inline double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

// Bytes over a span of ps as GB/s (= bytes per ns); 0 for an empty span.
inline double gb_per_s(uint64_t bytes, uint64_t ps) {
  return ps > 0 ? static_cast<double>(bytes) * 1e3 / static_cast<double>(ps) : 0.0;
}

// Model FLOPs utilisation: matmul FLOPs over what `cores` cores at peak could do in `ps`.
inline double mfu_percent(uint64_t matmul_flops, uint64_t ps, double peak_flops_per_core,
                          size_t cores) {
  const double possible =
      static_cast<double>(ps) * 1e-12 * peak_flops_per_core * static_cast<double>(cores);
  return percent(static_cast<double>(matmul_flops), possible);
}

// Sums over every core of a run.
struct Totals {
  size_t cores = 0;
  size_t physical_cores = 0;  // whose engines did the work (a logical core counts its own)
  std::array<uint64_t, isa::kNumEngines> busy_ps{};  // indexed by isa::Engine
  std::array<uint64_t, isa::kNumEngines> instructions{};
  uint64_t all_instructions = 0;
  uint64_t dma_bytes = 0, dma_busy_ps = 0, dma_transfers = 0;
  uint64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  uint64_t flops = 0, matmul_flops = 0;
};

inline void add_core(Totals& t, const sim::CoreStats& c) {
  ++t.cores;
  t.physical_cores += c.physical_cores;
  for (size_t e = 0; e < c.engines.size(); ++e) {
    t.busy_ps[e] += c.engines[e].busy_ps;
    t.instructions[e] += c.engines[e].instructions;
    t.all_instructions += c.engines[e].instructions;
  }
  t.dma_bytes += c.dma_bytes;
  t.dma_busy_ps += c.dma_busy_ps;
  t.dma_transfers += c.dma_transfers;
  t.hbm_read_bytes += c.hbm_read_bytes;
  t.hbm_write_bytes += c.hbm_write_bytes;
  t.flops += c.flops;
  t.matmul_flops += c.matmul_flops;
}

inline Totals totals(const sim::RunResult& r) {
  Totals t;
  for (const sim::CoreStats& c : r.cores) add_core(t, c);
  return t;
}

}  // namespace neuronsim::traces::detail
