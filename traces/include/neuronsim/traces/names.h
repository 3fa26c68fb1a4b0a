// The names traces, metrics and summaries give to engines, DMA queues and
// instructions, after Neuron Explorer's spelling. One place, so a trace row, a
// metric and a summary line always agree. docs/traces.md lists them all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "neuronsim/isa/instruction.h"

namespace neuronsim::traces {

// Timeline row of an engine: "Tensor (PE)", "Vector (DVE)", "Scalar (ACT)",
// "GpSimd (Pool)", "Sync (SP)".
std::string_view engine_track_name(isa::Engine e);

// Neuron Explorer's lower-case engine word, used in metric names
// (tensor_engine_active_time_percent): "tensor", "vector", "scalar", "gpsimd", "sync".
std::string_view engine_metric_name(isa::Engine e);

// The row of a core's executions (one slice per execution, named after it): "kernels".
std::string_view kernel_track_name();

// Row order of the engines in a core: Tensor, Vector, Scalar, GpSimd, Sync (0..4).
int engine_track_order(isa::Engine e);

// A DMA queue of a triggering engine, Neuron Explorer style q<Owner>IO<n>:
// qSyncIO0, qScalarIO3, qGpSimdIO15 (owner = first word of engine_track_name).
std::string dma_queue_name(isa::Engine trigger, uint32_t queue);

// Slice name of an instruction: the profiler's upper-case opcode. The ISA name
// upper-cased (MATMUL, TENSOR_TENSOR, ...) except activation -> ACTIVATE,
// dma_copy -> DMA_TRIGGER (the engine-side cost; the transfer has its own
// slices) and sem_wait/sem_signal/sem_set -> EVENT_SEMAPHORE.
std::string_view opcode_slice_name(isa::Opcode op);

}  // namespace neuronsim::traces
