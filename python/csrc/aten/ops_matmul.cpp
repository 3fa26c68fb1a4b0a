// Matrix products on TensorE: mm, bmm, addmm, and _grouped_mm (a mixture of experts'
// products). The kernel reads transposed operands (linear's weight.t()) through strided
// access patterns, so no copy is made first; it accumulates in FP32 and rounds once into
// the output dtype.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/integers.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "neuronsim/kernels/graph.h"

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
      !is_engine_float(out.scalar_type()))
    return false;
  if (a.numel() == 0 || b.numel() == 0) {  // no rows (an expert no token chose), or no terms
    if (!a.device().is_privateuseone() || b.device() != a.device() || out.device() != a.device())
      return false;
    if (out.numel() > 0) out.zero_();
    return true;
  }
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

// The dot product of two 1-D tensors: floats as the product [1, n] @ [n, 1] on TensorE (FP32
// accumulation, rounded once); integers as their products summed exactly on limbs, wrapped to
// the type as the CPU's sum wraps.
at::Tensor dot(const at::Tensor& a, const at::Tensor& b) {
  if (a.device().is_privateuseone() && b.device() == a.device() && a.dim() == 1 && b.dim() == 1 &&
      a.numel() == b.numel() && a.scalar_type() == b.scalar_type()) {
    const c10::ScalarType type = a.scalar_type();
    if (a.numel() == 0 && (is_engine_float(type) || is_limb_integer(type)))
      return at::zeros({}, a.options());
    if (is_engine_float(type)) {
      at::Tensor out = at::empty({1, 1}, a.options());
      if (matmul_into("aten::dot", a.unsqueeze(0), b.unsqueeze(1), out))
        return out.view(at::IntArrayRef{});
    } else if (is_limb_integer(type) && type != at::kBool) {
      return at::sum(a * b, type);
    }
  }
  return Fallback<ATEN_OP(dot)>::call(a, b);
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
      if (fb == 0.0f && fa == 1.0f) return product;  // beta = 0 ignores the bias, NaN or not
      kernels::PointwiseExpr e;
      kernels::PointwiseExpr::Reg p = e.load(0);
      if (fa != 1.0f) p = e.alu_imm(isa::AluOp::multiply, p, fa);
      std::vector<at::Tensor> inputs{product};
      if (fb != 0.0f) {
        kernels::PointwiseExpr::Reg c = e.load(1);
        if (fb != 1.0f) c = e.alu_imm(isa::AluOp::multiply, c, fb);
        e.alu(isa::AluOp::add, p, c);
        inputs.push_back(bias);
      }
      at::Tensor out = at::empty_like(product);
      if (run_pointwise("aten::addmm", fmt::format("alpha={} beta={}", fa, fb), e, inputs, out))
        return out;
    }
  }
  return Fallback<ATEN_OP(addmm)>::call(bias, a, b, beta, alpha);
}

at::Tensor& addmm_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (out.device() == a.device() && out.scalar_type() == a.scalar_type() &&
      a.device().is_privateuseone()) {
    const at::Tensor result = pytorch::addmm(bias, a, b, beta, alpha);
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    return out;
  }
  return Fallback<ATEN_OP2(addmm, out)>::call(bias, a, b, beta, alpha, out);
}

// vdot conjugates its first operand: of real vectors, their dot.
at::Tensor vdot(const at::Tensor& a, const at::Tensor& b) {
  if (!a.is_complex() && !b.is_complex() && a.device().is_privateuseone())
    return pytorch::dot(a, b);
  return Fallback<ATEN_OP(vdot)>::call(a, b);
}

// The cross product of 3-vectors along dim, broadcast: (a1 b2 - a2 b1, a2 b0 - a0 b2,
// a0 b1 - a1 b0), each product and difference in the operands' dtype as the CPU's kernel
// rounds them; integers exact on their limbs.
at::Tensor& linalg_cross_out(const at::Tensor& a, const at::Tensor& b, int64_t dim,
                             at::Tensor& out) {
  const c10::ScalarType type = a.scalar_type();
  if (a.device().is_privateuseone() && b.device() == a.device() && out.device() == a.device() &&
      a.dim() == b.dim() && a.dim() > 0 && b.scalar_type() == type && out.scalar_type() == type &&
      (is_engine_float(type) || (is_limb_integer(type) && type != at::kBool))) {
    const int64_t d = at::maybe_wrap_dim(dim, a.dim());
    if (a.size(d) == 3 && b.size(d) == 3) {
      const auto at_ = [d](const at::Tensor& t, int64_t i) { return t.narrow(d, i, 1); };
      const auto term = [&](int64_t i, int64_t j) {
        return at_(a, i) * at_(b, j) - at_(a, j) * at_(b, i);
      };
      const at::Tensor r = at::cat({term(1, 2), term(2, 0), term(0, 1)}, d);
      at::native::resize_output(out, r.sizes());
      out.copy_(r);
      return out;
    }
  }
  return Fallback<ATEN_OP2(linalg_cross, out)>::call(a, b, dim, out);
}

// beta * self + alpha * (mat @ vec): addmm's product of [n, m] @ [m, 1] and its pointwise, the
// vector self ([n], [1] or 0-dim) as a column.
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (mat.device().is_privateuseone() && vec.device() == mat.device() &&
      self.device() == mat.device() && out.device() == mat.device() && mat.dim() == 2 &&
      vec.dim() == 1 && mat.size(1) == vec.size(0) && self.dim() <= 1 &&
      is_engine_float(mat.scalar_type()) && vec.scalar_type() == mat.scalar_type() &&
      self.scalar_type() == mat.scalar_type() && out.scalar_type() == mat.scalar_type()) {
    const at::Tensor column = self.dim() == 1 ? self.unsqueeze(1) : self;
    const at::Tensor r = pytorch::addmm(column, mat, vec.unsqueeze(1), beta, alpha).squeeze(1);
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
    return out;
  }
  return Fallback<ATEN_OP2(addmv, out)>::call(self, mat, vec, beta, alpha, out);
}

// beta * self + alpha * (batch1 @ batch2): the batched product on TensorE, then pointwise.
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (batch1.device().is_privateuseone() && batch2.device() == batch1.device() &&
      self.device() == batch1.device() && out.device() == batch1.device() &&
      batch1.scalar_type() == batch2.scalar_type() && batch1.dim() == 3 && batch2.dim() == 3 &&
      is_engine_float(batch1.scalar_type())) {  // integers truncate alpha and beta: the CPU's
    at::Tensor r = at::bmm(batch1, batch2);
    if (alpha.toDouble() != 1.0) r = r * alpha;
    if (beta.toDouble() != 0.0) r = beta.toDouble() == 1.0 ? r + self : r + self * beta;
    at::native::resize_output(out, r.sizes());
    out.copy_(r);
    return out;
  }
  return Fallback<ATEN_OP2(baddbmm, out)>::call(self, batch1, batch2, beta, alpha, out);
}

// Where each group of rows ends (offs, cumulative), read by the host: the one value a
// grouped product needs before its program can be made. Timing-only mode has no values and
// takes the rows as evenly spread over the groups (the routing a balanced router gives).
std::vector<int64_t> group_ends(const at::Tensor& offs, int64_t rows) {
  const int64_t groups = offs.numel();
  std::vector<int64_t> ends(static_cast<size_t>(groups));
  if (values_unspecified()) {
    for (int64_t g = 0; g < groups; ++g) ends[static_cast<size_t>(g)] = rows * (g + 1) / groups;
    return ends;
  }
  const at::Tensor host = offs.to(at::kCPU, at::kLong).contiguous();
  std::copy_n(host.data_ptr<int64_t>(), groups, ends.begin());
  return ends;
}

// out[rows of group g] = a[those rows] @ b[g] for 2-D a [S, K], 3-D b [G, K, N] and
// cumulative row ends offs [G] (torch._grouped_mm's "2d x 3d" case): one program whose
// stages are the groups' matmuls, so that a group's weights load while the last one
// computes. Rows past the last group's end are zero. Other cases fall back.
bool grouped_mm_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& offs,
                     const at::Tensor& out) {
  const char* op = "aten::_grouped_mm";
  const int64_t S = a.size(0), K = a.size(1), N = b.size(2), G = b.size(0);
  const std::vector<int64_t> ends = group_ends(offs, S);
  int64_t start = 0;
  for (const int64_t end : ends) {
    if (end < start || end > S) return false;  // the CPU reports torch's error
    start = end;
  }
  if (start < S) out.narrow(0, start, S - start).zero_();
  const kernels::View va = view_of(a), vb = view_of(b), vo = view_of(out);
  const isa::DType dtype = *engine_dtype(a.scalar_type());
  const std::string chip = target();
  const auto build = [&] {
    kernels::GraphProgram program(chip);
    program.tensor("a", dtype, va.extent_elems(), isa::TensorKind::input);
    program.tensor("b", dtype, vb.extent_elems(), isa::TensorKind::input);
    program.tensor("out", vo.dtype, vo.extent_elems(), isa::TensorKind::output);
    int64_t first = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t rows = ends[static_cast<size_t>(g)] - first;
      if (rows > 0)
        program.matmul(
            {"a", first * va.strides[0], {dtype, {rows, K}, {va.strides[0], va.strides[1]}}},
            {"b", g * vb.strides[0], {dtype, {K, N}, {vb.strides[1], vb.strides[2]}}},
            {"out", first * vo.strides[0], {vo.dtype, {rows, N}, {vo.strides[0], vo.strides[1]}}});
      first = ends[static_cast<size_t>(g)];
    }
    return program.finish();
  };
  if (start == 0) return true;
  return run_kernel_once(op, op_device(op, {&a, &b, &out}), build,
                         {{"a", a}, {"b", b}, {"out", out}});
}

at::Tensor grouped_mm(const at::Tensor& a, const at::Tensor& b,
                      const std::optional<at::Tensor>& offs, const std::optional<at::Tensor>& bias,
                      std::optional<c10::ScalarType> out_dtype) {
  const c10::ScalarType type = out_dtype.value_or(a.scalar_type());
  if (a.dim() == 2 && b.dim() == 3 && offs && offs->defined() && offs->dim() == 1 &&
      offs->numel() == b.size(0) && (!bias || !bias->defined()) && a.size(1) == b.size(1) &&
      a.device().is_privateuseone() && b.device() == a.device() && offs->device() == a.device() &&
      is_engine_float(a.scalar_type()) && a.scalar_type() == b.scalar_type() &&
      is_engine_float(type) && a.size(0) > 0 && b.numel() > 0) {
    const at::Tensor out = at::empty({a.size(0), b.size(2)}, a.options().dtype(type));
    if (grouped_mm_into(a, b, *offs, out)) return out;
  }
  return Fallback<ATEN_OP(_grouped_mm)>::call(a, b, offs, bias, out_dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_grouped_mm", grouped_mm);
  m.impl("mm", mm);
  m.impl("dot", dot);
  m.impl("vdot", vdot);
  m.impl("addmv.out", addmv_out);
  m.impl("linalg_cross.out", linalg_cross_out);
  m.impl("mm.out", mm_out);
  m.impl("bmm", bmm);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
}

}  // namespace neuronsim::pytorch
