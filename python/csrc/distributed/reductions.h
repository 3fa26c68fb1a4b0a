// What the "neuron" process group does on the host: tensors as the bytes a collective moves,
// c10d's reduce ops and dtypes as the fabric's, and the exact host reductions of the dtypes the
// fabric does not reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "neuronsim/cc/algorithms.h"
#include "neuronsim/isa/dtype.h"

namespace neuronsim::pytorch {

using Bytes = std::vector<uint8_t>;

// ---- Bytes of tensors ----

// A process standing for symmetric ranks (GroupSetup::symmetric) moves no bytes: its collectives
// are timed, and their tensors, whose values timing-only mode does not compute, are neither read
// nor written (which would make the host hold every byte of the device's tensors).
bool symmetric_process();

// The tensor's elements in order, as bytes (device tensors are read through their host view).
Bytes bytes_of(const at::Tensor& t);
// Writes `n` bytes, the tensor's elements in order, into `t` (any layout, any device).
void write_bytes(const at::Tensor& t, const uint8_t* data, size_t n);
size_t nbytes(const at::Tensor& t);
Bytes concat(const std::vector<at::Tensor>& tensors);
// Writes consecutive pieces of `data` into `tensors`, each taking its own size.
void split_into(const std::vector<at::Tensor>& tensors, const Bytes& data);

// ---- Reductions ----

const char* reduce_name(const c10d::ReduceOp& op);
bool is_bitwise(const c10d::ReduceOp& op);
// The dtypes the fabric reduces (as the collective engines do, in FP32 rounded per step): the
// engines' floating-point types.
std::optional<isa::DType> fabric_dtype(at::ScalarType t);
cc::ReduceOp fabric_op(const c10d::ReduceOp& op);
// The input a rank contributes: its bytes, scaled first for PREMUL_SUM.
at::Tensor contribution(const at::Tensor& t, const c10d::ReduceOp& op);
// Reduces the `ranks` contributions laid one after another in `data` (each `numel` elements
// of `type`) in rank order, exactly: every rank computes the same bits. Low-precision floats
// are combined in FP32 and rounded once.
at::Tensor reduce_on_host(const Bytes& data, int ranks, int64_t numel, at::ScalarType type,
                          const c10d::ReduceOp& op);

}  // namespace neuronsim::pytorch
