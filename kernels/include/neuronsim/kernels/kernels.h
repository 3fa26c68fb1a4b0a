// Tile kernels for one NeuronCore, written with isa::KernelBuilder the way NKI
// kernels are written for the real hardware: the partition dim first (128
// partitions), one DMA per tile, matmuls accumulating over K in PSUM, and two or
// three SBUF buffers per stream so that the load of tile i+1 overlaps the compute
// of tile i (the builder's semaphores keep that correct).
//
// Every function returns a validated isa::Program for `target` ("trn1", "trn2",
// "trn3"), declares its HBM tensors under the names listed below, and throws
// std::invalid_argument with a message naming the kernel when a shape or dtype is
// not supported. Shapes are element counts; every dim must be in 1..65535 (a
// tensor's first dim is the row count of one HBM access pattern). SBUF limits
// scale with the target's SBUF (trn1 192 KiB, trn2 224 KiB, trn3 256 KiB).
#pragma once

#include <cstdint>
#include <string_view>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/program.h"

namespace neuronsim::kernels {

// C[M, N] = A[M, K] @ B[K, N].
// Tensors: inputs "a" [M, K] and "b" [K, N] in `dtype`, output "c" [M, N] in
// `out_dtype`. A is given row-major (not transposed): each [128, K] row block is
// transposed on chip by TensorE (128x128 blocks through PSUM), because the PE
// contracts over partitions and needs A^T as its stationary operand.
// Tiling: M in 128-row tiles (stationary free <= 128), K in 128-partition chunks
// accumulated in one PSUM bank, N in 512-column tiles (one 2 KiB bank of FP32).
// Any M, K, N in 1..65535 work (remainder tiles are smaller); dtype and
// out_dtype must be float dtypes, and the per-partition SBUF working set, about
// 4*K*size(dtype) + 2*N*size(out_dtype) bytes, must fit: on trn2 K <= 27648 for
// bf16 (13568 for fp32) and N <= 27392 with an fp32 result. B stays resident in
// SBUF when it takes at most half of it, and is otherwise streamed per tile.
isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N,
                    isa::DType dtype = isa::DType::bf16, isa::DType out_dtype = isa::DType::fp32);

enum class ElementwiseOp { add, multiply };

// out = x <op> y elementwise. Tensors: inputs "x", "y" and output "out", all
// [rows, cols] in `dtype` (any dtype; the engines compute in FP32 and round to
// dtype). Elementwise work does not care about the layout, so the tensors are
// tiled as a flat array: [128, 2048] tiles of contiguous HBM (one DMA each),
// alternating between VectorE and GpSimdE.
isa::Program elementwise(std::string_view target, ElementwiseOp op, int64_t rows, int64_t cols,
                         isa::DType dtype = isa::DType::fp32);

// out[r, :] = softmax(x[r, :]) over the last dim. Tensors: input "x", output
// "out", [rows, cols] in `dtype` (float). Rows go in 128-partition tiles; a whole
// row must fit in one tile: on trn2 cols <= 14304 for fp32, 19072 for bf16.
isa::Program softmax(std::string_view target, int64_t rows, int64_t cols,
                     isa::DType dtype = isa::DType::fp32);

// out[r, :] = log_softmax(x[r, :]) = x - max - log(sum(exp(x - max))), with the
// tensors, tiling and limits of softmax.
isa::Program log_softmax(std::string_view target, int64_t rows, int64_t cols,
                         isa::DType dtype = isa::DType::fp32);

// y = x / sqrt(mean(x^2) + eps) * gamma, per row. Tensors: inputs "x" [rows, cols]
// and "gamma" [cols], output "out" [rows, cols], all `dtype` (float). A whole row
// in one tile: on trn2 cols <= 11456 for fp32, 14304 for bf16.
isa::Program rmsnorm(std::string_view target, int64_t rows, int64_t cols, float eps = 1e-6f,
                     isa::DType dtype = isa::DType::fp32);

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per row (biased variance).
// Tensors: inputs "x" [rows, cols], "gamma" [cols], "beta" [cols], output "out"
// [rows, cols], all `dtype` (float). A whole row in one tile: on trn2 cols <= 9504
// for fp32, 11392 for bf16.
isa::Program layernorm(std::string_view target, int64_t rows, int64_t cols, float eps = 1e-5f,
                       isa::DType dtype = isa::DType::fp32);

// out[cols, rows] = x[rows, cols]^T, bit exact. Tensors: input "x" [rows, cols],
// output "out" [cols, rows], `dtype` (float). TensorE transposes 128x128 blocks
// into PSUM; any rows, cols >= 1.
isa::Program transpose(std::string_view target, int64_t rows, int64_t cols,
                       isa::DType dtype = isa::DType::fp32);

namespace detail {
// matmul with an explicit budget (bytes per partition) for keeping B resident in
// SBUF; 0 forces streaming. For tests of both paths.
isa::Program matmul(std::string_view target, int64_t M, int64_t K, int64_t N, isa::DType dtype,
                    isa::DType out_dtype, uint64_t b_resident_budget);
}  // namespace detail

}  // namespace neuronsim::kernels
