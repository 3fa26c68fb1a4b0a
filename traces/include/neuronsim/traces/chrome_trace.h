// Chrome trace-event JSON of a recorded run, for ui.perfetto.dev and
// chrome://tracing: one process per NeuronCore; a "kernels" thread with a slice
// per execution when the run has executions (a sim::Device trace session); one
// thread per engine, per DMA queue (a slice per dma_copy) and per DMA engine (a
// slice per transfer); semaphore flow arrows; HBM-bandwidth and DMA counters. No
// two slices of one thread overlap. docs/traces.md explains every track, name and
// argument.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/run_result.h"

namespace neuronsim::traces {

// A framework op name for the instructions [begin, end) of one engine stream of
// one core (instance-wide core id, as in the records). Where ranges nest, the
// innermost wins (latest begin, then earliest end, then the one listed last).
// DMA slices take the name of their dma_copy. Empty ranges are ignored.
struct OpName {
  uint32_t core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t begin = 0, end = 0;
  std::string name;
};

struct TraceOptions {
  // Shown as args.op on the slices they cover.
  std::vector<OpName> op_names;
  // The program each core ran (by core id), so that instruction text names HBM
  // tensors ("hbm.fp32(a)") instead of variable ids. Optional; where the run has
  // executions, the program of the execution that covers a record wins.
  std::map<uint32_t, const isa::Program*> programs;
  // HBM-bandwidth counter: 0 = exact step function (a point wherever the rate
  // changes, at transfer starts and ends); otherwise the average over buckets
  // of this many ps.
  uint64_t bandwidth_bucket_ps = 0;
  bool flows = true;     // semaphore flow arrows
  bool counters = true;  // HBM bandwidth and DMA in-flight counters
};

// The trace as a JSON object {"traceEvents": [...], "displayTimeUnit": "ns",
// "otherData": {...}}. Times: ts/dur in microseconds, exactly ps / 1e6.
nlohmann::json chrome_trace(const sim::RunResult& result, const TraceOptions& options = {});

// Writes the same trace to `path`, streamed event by event (one per line), so
// memory stays proportional to the records. Throws std::runtime_error naming
// the path when it cannot be written.
void write_chrome_trace(const sim::RunResult& result, const TraceOptions& options,
                        const std::filesystem::path& path);

}  // namespace neuronsim::traces
