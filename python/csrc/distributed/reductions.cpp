// The "neuron" process group's host side (reductions.h): the bytes of tensors, c10d's reduce
// ops and dtypes as the fabric's, and the host reductions in rank order.
#include "distributed/reductions.h"

#include <cstdlib>
#include <string>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "aten/kernel_call.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

// ---- Bytes of tensors -----------------------------------------------------------------------

bool symmetric_process() {
  static const bool on = [] {
    const char* v = std::getenv("NEURONSIM_SYMMETRIC_RANKS");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

Bytes bytes_of(const at::Tensor& t) {
  if (symmetric_process()) return {};
  const at::Tensor h = host_alias(t).contiguous();
  const auto* p = static_cast<const uint8_t*>(h.data_ptr());
  return Bytes(p, p + h.nbytes());
}

void write_bytes(const at::Tensor& t, const uint8_t* data, size_t n) {
  if (symmetric_process()) return;
  TORCH_INTERNAL_ASSERT(n == t.numel() * t.element_size(), "write_bytes: size mismatch");
  if (n == 0) return;
  const at::Tensor src = at::from_blob(const_cast<uint8_t*>(data), t.sizes(),
                                       at::TensorOptions().dtype(t.scalar_type()));
  host_alias(t).copy_(src);
}

size_t nbytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

Bytes concat(const std::vector<at::Tensor>& tensors) {
  Bytes all;
  for (const at::Tensor& t : tensors) {
    const Bytes b = bytes_of(t);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

void split_into(const std::vector<at::Tensor>& tensors, const Bytes& data) {
  if (symmetric_process()) return;
  size_t at = 0;
  for (const at::Tensor& t : tensors) {
    write_bytes(t, data.data() + at, nbytes(t));
    at += nbytes(t);
  }
}

// ---- Reductions -----------------------------------------------------------------------------

const char* reduce_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "sum";
    case c10d::ReduceOp::AVG:
      return "avg";
    case c10d::ReduceOp::PRODUCT:
      return "product";
    case c10d::ReduceOp::MIN:
      return "min";
    case c10d::ReduceOp::MAX:
      return "max";
    case c10d::ReduceOp::BAND:
      return "band";
    case c10d::ReduceOp::BOR:
      return "bor";
    case c10d::ReduceOp::BXOR:
      return "bxor";
    case c10d::ReduceOp::PREMUL_SUM:
      return "premul_sum";
    default:
      return "unknown";
  }
}

bool is_bitwise(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR ||
         op.op_ == c10d::ReduceOp::BXOR;
}

std::optional<isa::DType> fabric_dtype(at::ScalarType t) {
  const std::optional<isa::DType> d = engine_dtype(t);
  if (d == isa::DType::fp32 || d == isa::DType::bf16 || d == isa::DType::fp16) return d;
  return std::nullopt;
}

cc::ReduceOp fabric_op(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::AVG:
      return cc::ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT:
      return cc::ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return cc::ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return cc::ReduceOp::max;
    default:  // SUM, PREMUL_SUM (the factor is applied before)
      return cc::ReduceOp::sum;
  }
}

at::Tensor contribution(const at::Tensor& t, const c10d::ReduceOp& op) {
  at::Tensor h = host_alias(t).contiguous();
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return h;
  const auto* s = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s != nullptr, "PREMUL_SUM without its factor");
  const at::Tensor factor = s->tensor_factor.defined() ? host_alias(s->tensor_factor).clone()
                                                       : at::scalar_tensor(s->double_factor);
  return h.mul(factor.to(h.scalar_type()));
}

namespace {

at::Tensor combine(const at::Tensor& acc, const at::Tensor& x, const c10d::ReduceOp& op) {
  const bool boolean = acc.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::PRODUCT:
      return boolean ? at::logical_and(acc, x) : acc * x;
    case c10d::ReduceOp::MIN:
      return at::minimum(acc, x);
    case c10d::ReduceOp::MAX:
      return at::maximum(acc, x);
    case c10d::ReduceOp::BAND:
      return at::bitwise_and(acc, x);
    case c10d::ReduceOp::BOR:
      return at::bitwise_or(acc, x);
    case c10d::ReduceOp::BXOR:
      return at::bitwise_xor(acc, x);
    default:  // SUM, AVG, PREMUL_SUM
      return boolean ? at::logical_or(acc, x) : acc + x;
  }
}

}  // namespace

at::Tensor reduce_on_host(const Bytes& data, int ranks, int64_t numel, at::ScalarType type,
                          const c10d::ReduceOp& op) {
  if (symmetric_process()) return {};
  const at::Tensor all =
      at::from_blob(const_cast<uint8_t*>(data.data()), {ranks, numel}, at::TensorOptions(type));
  const bool widen = at::isFloatingType(type) && type != at::kDouble;
  const auto compute = widen ? at::kFloat : type;
  at::Tensor acc = all[0].to(compute, /*non_blocking=*/false, /*copy=*/true);
  for (int r = 1; r < ranks; ++r) acc = combine(acc, all[r].to(compute), op);
  if (op.op_ == c10d::ReduceOp::AVG) acc = acc / ranks;
  return acc.to(type);
}

}  // namespace neuronsim::pytorch
