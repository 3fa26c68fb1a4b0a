// What every aten kernel of the backend shares: the engines' dtype of a torch dtype,
// the kernels' View of a tensor, the cache key of a call, and running a kernel from
// kernels/ on the op's device. The ops (ops_*.cpp) use only these.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>

#include "aten/fallback.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/kernels/eager.h"

namespace neuronsim::pytorch {

// Calls the counted CPU fallback for aten op `Op` (ATEN_OP / ATEN_OP2).
template <class Op>
using Fallback = at::native::call_fallback_fn<&neuron_cpu_fallback, Op>;
template <class Op>
using FallbackSymInt = at::native::call_fallback_fn_symint<&neuron_cpu_fallback, Op>;

// The engines' type of a torch dtype; none for int64, float64 (no such ALU types).
std::optional<isa::DType> engine_dtype(c10::ScalarType t);
// float32, bfloat16 and float16: what the float kernels compute in.
bool is_engine_float(c10::ScalarType t);
// Every value of the dtype is exact in FP32 (the engines' compute type).
bool exact_in_fp32(c10::ScalarType t);

// The kernels' view of a neuron tensor (sizes and strides in elements).
kernels::View view_of(const at::Tensor& t);
// Part of a cache key: dtype, sizes and strides.
std::string layout_key(const at::Tensor& t);

// The neuron device of an op's tensors; throws naming both devices when they differ.
int op_device(const char* op, std::initializer_list<const at::Tensor*> tensors);
int op_device(const char* op, const std::vector<at::Tensor>& tensors);

// Loads (once per device and key) the program `build` makes and runs it with the named
// tensors. Returns false, running nothing, when the kernel refuses the case.
bool run_kernel(const char* op, int device, const std::string& key,
                const std::function<isa::Program()>& build,
                const std::vector<std::pair<std::string, at::Tensor>>& tensors);

// The same for a program made for one call (a grouped matmul of this call's routing):
// built, run and unloaded, never kept.
bool run_kernel_once(const char* op, int device, const std::function<isa::Program()>& build,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors);

// A host number as a one-element FP32 input on `device`, written by the host into a
// ring of slots (no kernel, no allocation): kernels read it at run time, so one kernel
// serves every value of a learning rate or a bias correction. A slot is reused after
// 4096 more scalars, long after the synchronous kernel that read it has run.
at::Tensor device_scalar(float v, const c10::Device& device);

// A Python number as a 0-dim CPU tensor marked as a wrapped number, so that type
// promotion treats it as torch treats a number: x0 (a 0-dim float32) != 0.0 stays float32.
at::Tensor wrapped_number(const at::Scalar& v);

// The tensor "seeds" of a pointwise kernel that draws random() values (kernels/eager.h):
// every lane's generator state, from the next key of the device's default generator for
// `numel` values (or of `generator`, a neuron generator, when given). Written by the host
// like device_scalar; a fresh block per call.
at::Tensor random_seeds(const c10::Device& device, uint64_t numel,
                        const std::optional<at::Generator>& generator = std::nullopt);

// The target of the simulated chip ("trn2", ...).
std::string target();

// out <- expr(inputs) elementwise, the inputs broadcast to out's sizes. `name` says what
// expr computes, for the reader of a trace; the cache key holds the expression itself, its
// immediates included. Returns false when the case is not
// covered (a dtype without an engine type, a layout the kernel refuses, an input
// overlapping out other than exactly).
bool run_pointwise(const char* op, const std::string& name, const kernels::PointwiseExpr& expr,
                   const std::vector<at::Tensor>& inputs, const at::Tensor& out,
                   const std::optional<at::Generator>& generator = std::nullopt);

// The same with one output per expr.outputs() (tensors "out0", ...), all of outs[0]'s
// sizes, and no check that inputs and outputs are apart: the caller has checked that
// each input is an output's tensor exactly or no alias of it (the limb views of one
// tensor interleave without overlapping).
// A kernel that draws random() values gets its seeds from random_seeds (of `generator`).
bool run_pointwise_outputs(const char* op, const std::string& name,
                           const kernels::PointwiseExpr& expr,
                           const std::vector<at::Tensor>& inputs,
                           const std::vector<at::Tensor>& outs,
                           const std::optional<at::Generator>& generator = std::nullopt);

// t's elements as a 1-D tensor of stride 1: a view when t is contiguous, else a copy. A
// reinterpreting view (int64 as pairs of int32 words) needs it: reshape keeps a strided
// 1-D index, or the stray stride of a size-1 dim, which such a view refuses.
at::Tensor flat_dense(const at::Tensor& t);

// `in` aliases out's bytes other than as the very same view (sizes, strides, start).
bool overlaps(const at::Tensor& in, const at::Tensor& out);

// dst <- src on one device as one pointwise copy (a cast, or a change of layout). False
// when not covered (int64, float64, two devices).
bool copy_on_device(const at::Tensor& src, const at::Tensor& dst);
// x's sizes and dtype on the meta device, holding nothing: torch's meta kernels give an op's
// output sizes from it, and raise the op's own errors, without computing.
at::Tensor meta_twin(const at::Tensor& x);

// out <- a / b rounded toward -inf (floor) or toward zero, of floats (a tensor and a
// tensor or a Python number), as torch rounds them. False when not covered.
bool float_divide_rounded_into(const at::Tensor& a, const at::Tensor& b, bool floor,
                               const at::Tensor& out);

// dst <- src (same sizes and dtype, broadcasting src) as DMA copies of the runs of
// elements contiguous in both, on the destination's queue: exact for every dtype. False,
// copying nothing, when that would take more than 64 copies.
bool copy_by_runs(const at::Tensor& src, const at::Tensor& dst);

// out <- op over `dim` of `in` (out has in's sizes with dim kept as 1 or removed).
bool run_reduce(const char* op, kernels::ReduceOp reduce, const at::Tensor& in, int64_t dim,
                const at::Tensor& out);

// out <- the running sums of in along dim (same sizes; in an engine dtype).
bool run_cumsum(const char* op, const at::Tensor& in, int64_t dim, const at::Tensor& out,
                bool product = false);

// An int32 view of the low words of an int64 tensor's elements, after zeroing every word:
// a kernel that writes non-negative int32 values there (indices) leaves a correct
// int64 tensor. False when the zero fill is not covered.
std::optional<at::Tensor> int64_low_words(const at::Tensor& int64);

}  // namespace neuronsim::pytorch
