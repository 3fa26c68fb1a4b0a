#include "neuronsim/traces/summary.h"

#include <fmt/format.h>

#include "derived.h"
#include "neuronsim/traces/names.h"

namespace neuronsim::traces {
namespace {

using detail::percent;
using detail::ps_to_us;

// 1234567 -> "1,234,567" (no locale).
std::string grouped(uint64_t v) {
  std::string digits = fmt::format("{}", v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

constexpr std::string_view kRowFormat = "  {:<15} {:>12} {:>9} {:>14}\n";

// Engine table, DMA, HBM and FLOP lines of `t` (one core or all of them) over
// a run of r.total_ps.
void section(std::string& out, const detail::Totals& t, const sim::RunResult& r) {
  const double available_ps = static_cast<double>(r.total_ps) * static_cast<double>(t.cores);
  out += fmt::format(kRowFormat, "engine", "busy (µs)", "util (%)", "instructions");
  for (isa::Engine e : detail::kEngineOrder) {
    const auto k = static_cast<size_t>(e);
    out +=
        fmt::format(kRowFormat, engine_track_name(e), fmt::format("{:.3f}", ps_to_us(t.busy_ps[k])),
                    fmt::format("{:.1f}", percent(static_cast<double>(t.busy_ps[k]), available_ps)),
                    grouped(t.instructions[k]));
  }
  const double avg = t.dma_transfers > 0
                         ? static_cast<double>(t.dma_bytes) / static_cast<double>(t.dma_transfers)
                         : 0.0;
  out += fmt::format(
      "  DMA      {} bytes in {} transfers (average {:.0f} B), DMA engines busy {:.3f} µs\n",
      grouped(t.dma_bytes), grouped(t.dma_transfers), avg, ps_to_us(t.dma_busy_ps));
  const double bw = detail::gb_per_s(t.hbm_read_bytes + t.hbm_write_bytes, r.total_ps);
  out += fmt::format("  HBM      read {} B, write {} B, achieved {:.2f} GB/s",
                     grouped(t.hbm_read_bytes), grouped(t.hbm_write_bytes), bw);
  if (r.hbm_bytes_per_ns > 0)
    out += fmt::format(" ({:.2f} % of the chip's {:.0f} GB/s)", percent(bw, r.hbm_bytes_per_ns),
                       r.hbm_bytes_per_ns);
  out += '\n';
  out += fmt::format(
      "  FLOPs    {} (matmul {}), MFU {:.2f} %\n", grouped(t.flops), grouped(t.matmul_flops),
      detail::mfu_percent(t.matmul_flops, r.total_ps, r.peak_flops_per_core, t.physical_cores));
}

}  // namespace

std::string summary_table(const sim::RunResult& r) {
  const detail::Totals all = detail::totals(r);
  std::string out = "neuronsim run";
  if (!r.instance.empty()) out += fmt::format(" on {}", r.instance);
  if (!r.generation.empty()) out += fmt::format(" ({})", r.generation);
  out += fmt::format(": {} NeuronCore{}, total simulated time {:.3f} µs\n", all.cores,
                     all.cores == 1 ? "" : "s", ps_to_us(r.total_ps));
  for (size_t i = 0; i < r.cores.size(); ++i) {
    out += fmt::format("\nNeuronCore {} (finished at {:.3f} µs)\n", detail::core_id(r, i),
                       ps_to_us(r.cores[i].end_ps));
    if (r.cores[i].launch_ps > 0)
      out += fmt::format("  launch   {:.3f} µs, the runtime's, before the core's instructions\n",
                         ps_to_us(r.cores[i].launch_ps));
    detail::Totals one;
    detail::add_core(one, r.cores[i]);
    section(out, one, r);
  }
  if (r.cores.size() < 2) return out;  // one core: its section is the total
  out += fmt::format("\nAll cores ({} instructions)\n", grouped(all.all_instructions));
  section(out, all, r);
  return out;
}

}  // namespace neuronsim::traces
