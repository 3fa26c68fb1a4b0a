// What a simulated run produced, beyond memory contents: totals per core and
// engine, and (when recording) every instruction, DMA transfer and semaphore
// hand-off with its simulated time. Times are integer picoseconds, so results
// are exact and identical on every machine.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/program.h"

namespace neuronsim::sim {

struct InstructionRecord {
  uint32_t core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;                      // position in the engine's stream
  const isa::Instruction* inst = nullptr;  // owned by the loaded program
  uint64_t start_ps = 0, end_ps = 0;       // engine busy interval
  uint64_t wait_ps = 0;                    // time blocked on its semaphore wait before start
};

struct DmaRecord {
  uint32_t core = 0;
  isa::Engine trigger = isa::Engine::SP;  // engine whose stream issued the dma_copy
  uint32_t index = 0;                     // the dma_copy's position in that stream
  uint32_t queue = 0;                     // queue of the triggering engine (0-15)
  uint32_t dma_engine = 0;                // which of the core's DMA engines carried it
  uint64_t bytes = 0, hbm_bytes = 0;
  uint64_t start_ps = 0, end_ps = 0;
  uint64_t descriptors = 1;  // contiguous pieces (each costs the engine its descriptor overhead)
};

// A semaphore signal that released a waiting instruction: a flow arrow in traces.
struct FlowRecord {
  uint32_t core = 0;
  uint16_t semaphore = 0;
  isa::Engine from_engine = isa::Engine::SP;  // producer (for DMA: the triggering engine)
  uint32_t from_index = 0;
  bool from_dma = false;  // the signal came from a DMA transfer's completion
  uint64_t from_ps = 0;   // when the signal landed
  isa::Engine to_engine = isa::Engine::SP;
  uint32_t to_index = 0;
  uint64_t to_ps = 0;  // when the waiting instruction started
};

struct EngineStats {
  uint64_t busy_ps = 0;
  uint64_t instructions = 0;
};

struct CoreStats {
  std::array<EngineStats, isa::kNumEngines> engines{};
  uint64_t end_ps = 0;       // when the core's last engine or transfer finished
  uint64_t launch_ps = 0;    // the runtime's launch before the core's first instruction
  uint64_t dma_bytes = 0;    // all DMA traffic
  uint64_t dma_busy_ps = 0;  // summed busy time of the core's DMA engines
  uint64_t dma_transfers = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t flops = 0;         // 2 per MAC on TensorE, 1 per element elsewhere
  uint64_t matmul_flops = 0;  // TensorE only (for MFU)
  // Physical cores whose engines did the work: 2 for a program split over a logical core
  // (isa::Program::lnc), whose engine times are then those of each core of the pair.
  uint32_t physical_cores = 1;

  // Adds another run's counts of the same core (end_ps is left to the caller: it is a time).
  CoreStats& operator+=(const CoreStats& o) {
    for (size_t e = 0; e < engines.size(); ++e) {
      engines[e].busy_ps += o.engines[e].busy_ps;
      engines[e].instructions += o.engines[e].instructions;
    }
    dma_bytes += o.dma_bytes;
    dma_busy_ps += o.dma_busy_ps;
    dma_transfers += o.dma_transfers;
    hbm_read_bytes += o.hbm_read_bytes;
    hbm_write_bytes += o.hbm_write_bytes;
    flops += o.flops;
    matmul_flops += o.matmul_flops;
    launch_ps += o.launch_ps;
    physical_cores = std::max(physical_cores, o.physical_cores);
    return *this;
  }
};

// One execution on the device clock (sim::Device), for the kernel rows of a trace.
struct ExecutionRecord {
  uint32_t core = 0;
  uint64_t seq = 0;                       // the device's sequence number of the work
  std::string name;                       // the op or model name the caller gave
  const isa::Program* program = nullptr;  // kept alive by whoever holds the records
  uint64_t start_ps = 0, end_ps = 0;
  uint64_t launch_ps = 0;      // the runtime's launch, from start_ps, before the first instruction
  uint64_t host_bound_ps = 0;  // the core was ready this long before the host submitted it
};

// Work of the host that drives the device (a framework's dispatch of an op), on the device
// clock.
struct HostRecord {
  std::string name;
  uint64_t start_ps = 0, end_ps = 0;
};

struct RunResult {
  std::string instance;            // e.g. trn2.3xlarge
  std::string generation;          // e.g. trn2
  double peak_flops_per_core = 0;  // dense BF16, for MFU
  double hbm_bytes_per_ns = 0;     // per chip, for achieved-bandwidth ratios
  uint32_t hbm_stacks = 0;         // per chip (the per-stack bandwidth of neuron-profile's MBU)
  uint64_t start_ps = 0;  // where the run began on the device clock (records are relative to it)
  uint64_t total_ps = 0;  // from the start of the run to the last event
  std::vector<CoreStats> cores;    // one per core that ran a program
  std::vector<uint32_t> core_ids;  // instance-wide index of each entry of `cores`
  // Filled when recording is on (traces); empty otherwise.
  std::vector<InstructionRecord> instructions;
  std::vector<DmaRecord> dmas;
  std::vector<FlowRecord> flows;
  std::vector<ExecutionRecord> executions;  // filled by sim::Device
  std::vector<HostRecord> host;             // filled by sim::Device::host_work
};

}  // namespace neuronsim::sim
