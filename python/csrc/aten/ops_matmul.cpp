// Matrix products on TensorE: mm, bmm, addmm. The kernel reads transposed operands
// (linear's weight.t()) through strided access patterns, so no copy is made first;
// it accumulates in FP32 and rounds once into the output dtype.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/kernel_call.h"
#include "aten/refusal.h"

namespace neuronsim::pytorch {

namespace {

// The kernel keeps A^T for the whole of K in SBUF; a longer K (an LM head's backward,
// whose K is the vocabulary) runs in blocks of kKBlock.
constexpr int64_t kKBlock = 8192;

bool matmul_kernel(const char* op, const at::Tensor& a, const at::Tensor& b,
                   const at::Tensor& out) {
  const int device = op_device(op, {&a, &b, &out});
  const kernels::View va = view_of(a), vb = view_of(b), vo = view_of(out);
  const std::string chip = target();
  return run_kernel(
      op, device, fmt::format("{} {} {} ->{}", op, layout_key(a), layout_key(b), layout_key(out)),
      [&] { return kernels::matmul(chip, va, vb, vo); }, {{"a", a}, {"b", b}, {"out", out}});
}

// out = sum over K blocks of a[.., k block] @ b[k block, ..]: each block one matmul kernel
// on slices of a and b in place, into FP32, the partial products added by a pointwise
// kernel, and the sum rounded once into out's dtype.
bool matmul_k_blocks(const char* op, const at::Tensor& a, const at::Tensor& b,
                     const at::Tensor& out) {
  const int64_t K = a.size(-1);
  const at::Tensor sum = at::empty(out.sizes(), out.options().dtype(at::kFloat));
  const at::Tensor part = at::empty(out.sizes(), out.options().dtype(at::kFloat));
  kernels::PointwiseExpr add;
  add.alu(isa::AluOp::add, add.load(0), add.load(1));
  for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
    const int64_t len = std::min(kKBlock, K - k0);
    if (!matmul_kernel(op, a.narrow(-1, k0, len), b.narrow(-2, k0, len), k0 == 0 ? sum : part))
      return false;
    if (k0 > 0 && !run_pointwise(op, "sum of K blocks", add, {sum, part}, sum)) return false;
  }
  kernels::PointwiseExpr copy;
  copy.load(0);
  return run_pointwise(op, "round the K blocks' sum", copy, {sum}, out);
}

bool matmul_into(const char* op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  if (!is_engine_float(a.scalar_type()) || a.scalar_type() != b.scalar_type() ||
      !is_engine_float(out.scalar_type()) || a.numel() == 0 || b.numel() == 0)
    return false;
  if (matmul_kernel(op, a, b, out)) return true;
  if (a.size(-1) <= kKBlock || !matmul_k_blocks(op, a, b, out)) return false;
  take_refusal(op);  // the blocks ran on the device: the whole product's refusal is moot
  return true;
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0)) {
    at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
    if (matmul_into("aten::mm", a, b, out)) return out;
  }
  return Fallback<ATEN_OP(mm)>::call(a, b);
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1)) {
    at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
    if (matmul_into("aten::bmm", a, b, out)) return out;
  }
  return Fallback<ATEN_OP(bmm)>::call(a, b);
}

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) &&
      out.scalar_type() == a.scalar_type()) {
    at::native::resize_output(out, {a.size(0), b.size(1)});
    if (matmul_into("aten::mm", a, b, out)) return out;
  }
  return Fallback<ATEN_OP2(mm, out)>::call(a, b, out);
}

// beta * bias + alpha * (a @ b): the product on TensorE, then one pointwise kernel.
at::Tensor addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  if (a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && bias.device() == a.device() &&
      bias.scalar_type() == a.scalar_type()) {
    at::Tensor product = at::empty({a.size(0), b.size(1)}, a.options());
    if (matmul_into("aten::addmm", a, b, product)) {
      const float fa = static_cast<float>(alpha.toDouble()),
                  fb = static_cast<float>(beta.toDouble());
      kernels::PointwiseExpr e;
      kernels::PointwiseExpr::Reg p = e.load(0), c = e.load(1);
      if (fa != 1.0f) p = e.alu_imm(isa::AluOp::multiply, p, fa);
      if (fb != 1.0f) c = e.alu_imm(isa::AluOp::multiply, c, fb);
      e.alu(isa::AluOp::add, p, c);
      at::Tensor out = at::empty_like(product);
      if (fb == 0.0f) {
        if (fa == 1.0f) return product;
      } else if (run_pointwise("aten::addmm", fmt::format("alpha={} beta={}", fa, fb), e,
                               {product, bias}, out)) {
        return out;
      }
    }
  }
  return Fallback<ATEN_OP(addmm)>::call(bias, a, b, beta, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", mm);
  m.impl("mm.out", mm_out);
  m.impl("bmm", bmm);
  m.impl("addmm", addmm);
}

}  // namespace neuronsim::pytorch
