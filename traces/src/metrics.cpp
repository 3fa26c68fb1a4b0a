#include "neuronsim/traces/metrics.h"

#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "derived.h"
#include "neuronsim/traces/names.h"

namespace neuronsim::traces {
namespace {

using detail::gb_per_s;
using detail::percent;
using detail::ps_to_ns;
using nlohmann::json;

// Per-core figures under Neuron Explorer-like names.
json core_details(const sim::RunResult& r, size_t i) {
  const sim::CoreStats& c = r.cores[i];
  const double total = static_cast<double>(r.total_ps);
  json d = {
      {"core", detail::core_id(r, i)}, {"end_ps", c.end_ps}, {"end_time_ns", ps_to_ns(c.end_ps)}};
  uint64_t instructions = 0;
  for (isa::Engine e : detail::kEngineOrder) {
    const sim::EngineStats& s = c.engines[static_cast<size_t>(e)];
    const std::string n(engine_metric_name(e));
    d[n + "_engine_active_time_ns"] = ps_to_ns(s.busy_ps);
    d[n + "_engine_active_time_percent"] = percent(static_cast<double>(s.busy_ps), total);
    d[n + "_engine_instructions"] = s.instructions;
    instructions += s.instructions;
  }
  d["instructions"] = instructions;
  d["dma_bytes"] = c.dma_bytes;
  d["dma_transfers"] = c.dma_transfers;
  d["dma_transfer_average_bytes"] =
      c.dma_transfers > 0 ? static_cast<double>(c.dma_bytes) / static_cast<double>(c.dma_transfers)
                          : 0.0;
  d["dma_busy_time_ns"] = ps_to_ns(c.dma_busy_ps);
  d["hbm_read_bytes"] = c.hbm_read_bytes;
  d["hbm_write_bytes"] = c.hbm_write_bytes;
  d["hbm_bandwidth_GBps"] = gb_per_s(c.hbm_read_bytes + c.hbm_write_bytes, r.total_ps);
  d["flops"] = c.flops;
  d["matmul_flops"] = c.matmul_flops;
  d["mfu_estimated_percent"] =
      detail::mfu_percent(c.matmul_flops, r.total_ps, r.peak_flops_per_core, c.physical_cores);
  return d;
}

// OpcodeSummary: per (core, engine, opcode) instruction count and summed time.
json opcode_summary(const sim::RunResult& r) {
  std::map<std::tuple<uint32_t, int, int>, std::pair<uint64_t, uint64_t>> sums;  // -> count, ps
  for (const sim::InstructionRecord& rec : r.instructions) {
    const int op = rec.inst != nullptr ? static_cast<int>(rec.inst->opcode) : -1;
    auto& [count, ps] = sums[{rec.core, engine_track_order(rec.engine), op}];
    ++count;
    ps += rec.end_ps > rec.start_ps ? rec.end_ps - rec.start_ps : 0;
  }
  json out = json::array();
  for (const auto& [key, value] : sums) {
    const auto [core, order, op] = key;
    const isa::Engine engine = detail::kEngineOrder[static_cast<size_t>(order)];
    out.push_back(
        {{"core", core},
         {"engine", engine_metric_name(engine)},
         {"opcode", op >= 0 ? isa::opcode_info(static_cast<isa::Opcode>(op)).name : "unknown"},
         {"instructions", value.first},
         {"time_ns", ps_to_ns(value.second)}});
  }
  return out;
}

// Per DMA queue: transfers, bytes, summed transfer time.
json dma_queue_summary(const sim::RunResult& r) {
  struct Sum {
    uint64_t transfers = 0, bytes = 0, hbm_bytes = 0, ps = 0;
  };
  std::map<std::tuple<uint32_t, int, uint32_t>, std::pair<isa::Engine, Sum>> sums;
  for (const sim::DmaRecord& d : r.dmas) {
    auto& [engine, s] = sums[{d.core, engine_track_order(d.trigger), d.queue}];
    engine = d.trigger;
    ++s.transfers;
    s.bytes += d.bytes;
    s.hbm_bytes += d.hbm_bytes;
    s.ps += d.end_ps > d.start_ps ? d.end_ps - d.start_ps : 0;
  }
  json out = json::array();
  for (const auto& [key, value] : sums) {
    const auto& [engine, s] = value;
    out.push_back({{"core", std::get<0>(key)},
                   {"queue", dma_queue_name(engine, std::get<2>(key))},
                   {"transfers", s.transfers},
                   {"bytes", s.bytes},
                   {"hbm_bytes", s.hbm_bytes},
                   {"transfer_time_ns", ps_to_ns(s.ps)}});
  }
  return out;
}

}  // namespace

json metrics_json(const sim::RunResult& r, const MetricsOptions& options) {
  const detail::Totals t = detail::totals(r);
  const double total = static_cast<double>(r.total_ps);
  const double core_time = total * static_cast<double>(t.cores);

  json list = json::array();
  auto add = [&](std::string_view name, std::string_view unit, json value) {
    std::string full =
        options.prefix.empty() ? std::string(name) : fmt::format("{}/{}", options.prefix, name);
    list.push_back({{"name", std::move(full)}, {"unit", unit}, {"value", std::move(value)}});
  };

  add("total_time_ns", "ns", ps_to_ns(r.total_ps));
  uint64_t launch_ps = 0;  // the core's with the most (cores launch side by side)
  for (const sim::CoreStats& c : r.cores) launch_ps = std::max(launch_ps, c.launch_ps);
  add("launch_time_ns", "ns", ps_to_ns(launch_ps));
  for (isa::Engine e : detail::kEngineOrder) {
    const auto k = static_cast<size_t>(e);
    const std::string n(engine_metric_name(e));
    add(n + "_engine_active_time_ns", "ns", ps_to_ns(t.busy_ps[k]));
    add(n + "_engine_active_time_percent", "%",
        percent(static_cast<double>(t.busy_ps[k]), core_time));
    add(n + "_engine_instructions", "count", t.instructions[k]);
  }
  add("instructions", "count", t.all_instructions);
  add("dma_bytes", "bytes", t.dma_bytes);
  add("dma_transfers", "count", t.dma_transfers);
  add("dma_transfer_average_bytes", "bytes",
      t.dma_transfers > 0 ? static_cast<double>(t.dma_bytes) / static_cast<double>(t.dma_transfers)
                          : 0.0);
  add("dma_busy_time_ns", "ns", ps_to_ns(t.dma_busy_ps));
  add("hbm_read_bytes", "bytes", t.hbm_read_bytes);
  add("hbm_write_bytes", "bytes", t.hbm_write_bytes);
  const uint64_t hbm_bytes = t.hbm_read_bytes + t.hbm_write_bytes;
  add("hbm_bandwidth_GBps", "GB/s", gb_per_s(hbm_bytes, r.total_ps));
  add("hbm_bandwidth_percent", "%", percent(gb_per_s(hbm_bytes, r.total_ps), r.hbm_bytes_per_ns));
  add("flops", "FLOP", t.flops);
  add("matmul_flops", "FLOP", t.matmul_flops);
  add("mfu_estimated_percent", "%",
      detail::mfu_percent(t.matmul_flops, r.total_ps, r.peak_flops_per_core, t.physical_cores));

  json cores = json::array();
  for (size_t i = 0; i < r.cores.size(); ++i) cores.push_back(core_details(r, i));
  json details = {{"instance", r.instance},
                  {"generation", r.generation},
                  {"total_ps", r.total_ps},
                  {"num_cores", r.cores.size()},
                  {"peak_flops_per_core", r.peak_flops_per_core},
                  {"hbm_bytes_per_ns", r.hbm_bytes_per_ns},
                  {"cores", std::move(cores)}};
  if (!r.instructions.empty()) details["opcode_summary"] = opcode_summary(r);
  if (!r.dmas.empty()) details["dma_queue_summary"] = dma_queue_summary(r);
  return json{{"metrics", std::move(list)}, {"details", std::move(details)}};
}

void write_metrics_json(const sim::RunResult& result, const MetricsOptions& options,
                        const std::filesystem::path& path) {
  const std::string text =
      metrics_json(result, options).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write metrics {}", path.string()));
  out << text << '\n';
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write metrics {}", path.string()));
}

}  // namespace neuronsim::traces
