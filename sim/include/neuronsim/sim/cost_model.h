// The cost model: how long an instruction keeps its engine busy, and how a DMA
// splits into transfers. Pure functions of the instruction and the generation;
// every rule and its source is in docs/cost-model.md. The SystemC model adds
// waiting (semaphores, DMA queues, HBM contention) on top.
#pragma once

#include <cstdint>
#include <vector>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::sim {

// What the engine knows when it issues an instruction.
struct IssueContext {
  bool waited_on_semaphore = false;  // this instruction's wait was not yet satisfied at issue
  const isa::Instruction* previous = nullptr;  // the engine's previous instruction, if any
};

// Engine-busy time of a compute or control instruction in picoseconds (rounded
// to whole engine cycles). For dma_copy this is the trigger cost on its engine.
uint64_t instruction_ps(const isa::Instruction& inst, const spec::GenerationConfig& gen,
                        const IssueContext& ctx);

// The same in cycles of the instruction's engine clock.
uint64_t instruction_cycles(const isa::Instruction& inst, const spec::GenerationConfig& gen,
                            const IssueContext& ctx);

// One piece of a dma_copy, carried by one DMA engine.
struct DmaTransfer {
  uint32_t dma_engine = 0;        // 0..dma_engines-1 of the core
  uint64_t bytes = 0;             // bytes read (= bytes written)
  uint64_t hbm_bytes = 0;         // of which to or from HBM (counts against HBM bandwidth)
  uint64_t descriptors = 1;       // contiguous pieces of at most dma_descriptor_max_bytes
  double bandwidth_fraction = 1;  // of a copy's bandwidth: below 1 for a DMA transpose
};

// Splits a dma_copy the way the hardware does: one engine per group of
// partitions (128 / 16 = 8), rows of HBM patterns likewise.
std::vector<DmaTransfer> plan_dma(const isa::Instruction& inst, const spec::GenerationConfig& gen);

// Time one DMA engine needs for a transfer of `bytes` in `descriptors` pieces, without
// contention (ps): a fixed cost per descriptor, then the bytes at the sustained rate.
uint64_t dma_transfer_ps(uint64_t bytes, uint64_t descriptors, const spec::GenerationConfig& gen,
                         double bandwidth_fraction = 1);

// Floating-point operations an instruction performs (2 per MAC for matmul), for MFU.
uint64_t instruction_flops(const isa::Instruction& inst);

// The runtime's launch of an execution with `tensors` inputs and outputs
// (docs/cost-model.md §6).
uint64_t launch_ps(uint64_t tensors, const spec::GenerationConfig& gen);

// A copy of `bytes` between HBM places queued on a (logical) core of `lnc` physical cores: the
// trigger latency, then the bytes at the core's DMA rate, never faster than HBM reads and writes
// them (docs/cost-model.md §4.3).
uint64_t copy_ps(uint64_t bytes, uint32_t lnc, const spec::GenerationConfig& gen);

}  // namespace neuronsim::sim
