// complex64 on the device. A complex tensor is its float32 pairs: view_as_real gives the
// pairs, and selecting the last dim gives the real and the imaginary parts as two strided
// float views of the same bytes. Each op is one pointwise kernel that reads the parts of
// its operands and writes the parts of its result (two outputs):
// - view_as_complex (a view), polar, copies and casts of floats to complex;
// - add, sub and mul of complex tensors, float tensors and numbers: rotary embeddings in
//   complex form (Llama 4, DeepSeek-V2) are polar, then a complex product.
// Other complex ops (division, exp, abs, FFTs, ...) run on the CPU, counted.
#include <utility>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/complex.h"
#include "aten/fallback.h"
#include "aten/integers.h"
#include "aten/kernel_call.h"

namespace neuronsim::pytorch {

namespace {

using isa::ActFunc;
using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

bool is_device_complex(const at::Tensor& t) {
  return t.device().is_privateuseone() && t.scalar_type() == at::kComplexFloat && !t.is_conj() &&
         !t.is_neg();
}

// The real and imaginary parts of a complex64 neuron tensor.
std::pair<at::Tensor, at::Tensor> parts(const at::Tensor& t) {
  const at::Tensor pairs = at::view_as_real(t);
  return {pairs.select(-1, 0), pairs.select(-1, 1)};
}

// The operands of a kernel: each one's (real, imaginary) registers.
class ComplexOperands {
 public:
  // A complex or float neuron tensor, or a Python number; false when not covered.
  bool add(const at::Tensor& t, const c10::Device& device) {
    if (t.device().is_cpu() && t.dim() == 0) {
      const auto v = t.item<c10::complex<double>>();
      regs_.emplace_back(scalar(static_cast<float>(v.real()), device),
                         scalar(static_cast<float>(v.imag()), device));
      return true;
    }
    if (t.device() != device) return false;
    if (is_device_complex(t)) {
      auto [re, im] = parts(t);
      regs_.emplace_back(load(re), load(im));
      return true;
    }
    if (!is_engine_float(t.scalar_type())) return false;
    regs_.emplace_back(load(t), e_.constant(0.0f));
    return true;
  }

  Expr& expr() { return e_; }
  const Expr& expr() const { return e_; }
  const std::vector<at::Tensor>& inputs() const { return inputs_; }
  std::pair<Reg, Reg> operator[](size_t i) const { return regs_[i]; }

 private:
  Reg load(const at::Tensor& t) {
    inputs_.push_back(t);
    return e_.load(static_cast<int32_t>(inputs_.size() - 1));
  }
  Reg scalar(float v, const c10::Device& device) {  // an input: one kernel for every value
    return load(device_scalar(v, device));
  }

  Expr e_;
  std::vector<at::Tensor> inputs_;
  std::vector<std::pair<Reg, Reg>> regs_;
};

// Runs the kernel into out's parts; into a new tensor first when an input shares out's
// bytes (an in-place product reads both parts of each element it writes).
bool run_into(const char* op, const std::string& name, const ComplexOperands& x,
              const at::Tensor& out) {
  for (const at::Tensor& in : x.inputs())
    if (in.device().is_privateuseone() && overlaps(in, out)) {
      const at::Tensor fresh = at::empty(out.sizes(), out.options());
      return run_into(op, name, x, fresh) && complex_copy(fresh, out);
    }
  auto [re, im] = parts(out);
  return run_pointwise_outputs(op, name, x.expr(), x.inputs(), {re, im});
}

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  if (abs.device().is_privateuseone() && angle.device() == abs.device() &&
      out.device() == abs.device() && abs.scalar_type() == at::kFloat &&
      angle.scalar_type() == at::kFloat && out.scalar_type() == at::kComplexFloat) {
    at::native::resize_output(out, at::infer_size(abs.sizes(), angle.sizes()));
    ComplexOperands x;
    if (x.add(abs, abs.device()) && x.add(angle, abs.device())) {
      Expr& e = x.expr();
      const Reg r = x[0].first, theta = x[1].first;
      e.set_outputs({e.alu(AluOp::multiply, r, e.activation(ActFunc::cos, theta)),
                     e.alu(AluOp::multiply, r, e.activation(ActFunc::sin, theta))});
      if (run_into("aten::polar", "polar", x, out)) return out;
    }
  }
  return Fallback<ATEN_OP2(polar, out)>::call(abs, angle, out);
}

}  // namespace

bool complex_binary_into(const char* op, AluOp alu, const at::Tensor& a, const at::Tensor& b,
                         double alpha, const at::Tensor& out) {
  if (!is_device_complex(out) || at::result_type(a, b) != at::kComplexFloat ||
      (alu != AluOp::add && alu != AluOp::subtract && alu != AluOp::multiply) ||
      (alu == AluOp::multiply && alpha != 1.0))
    return false;
  ComplexOperands x;
  if (!x.add(a, out.device()) || !x.add(b, out.device())) return false;
  Expr& e = x.expr();
  auto [ar, ai] = x[0];
  auto [br, bi] = x[1];
  if (alu == AluOp::multiply) {  // (ar + i ai)(br + i bi)
    e.set_outputs(
        {e.alu(AluOp::subtract, e.alu(AluOp::multiply, ar, br), e.alu(AluOp::multiply, ai, bi)),
         e.alu(AluOp::add, e.alu(AluOp::multiply, ar, bi), e.alu(AluOp::multiply, ai, br))});
  } else {
    const auto scaled = [&](Reg v) {
      return alpha == 1.0 ? v : e.alu_imm(AluOp::multiply, v, static_cast<float>(alpha));
    };
    e.set_outputs({e.alu(alu, ar, scaled(br)), e.alu(alu, ai, scaled(bi))});
  }
  return run_into(op, fmt::format("complex {} alpha={}", isa::alu_op_name(alu), alpha), x, out);
}

bool complex_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (!is_device_complex(dst) || src.device() != dst.device() || src.sizes() != dst.sizes())
    return false;
  if (is_limb_integer(src.scalar_type())) {  // the real part rounded as a cast, the other zero
    auto [re, im] = parts(dst);
    if (!integer_copy(src, re)) return false;
    im.zero_();
    return true;
  }
  ComplexOperands x;
  if (!x.add(src, dst.device())) return false;
  auto [re, im] = x[0];
  x.expr().set_outputs({re, im});
  return run_into("aten::copy_", "complex copy", x, dst);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_complex", at::native::view_as_complex);  // views: sizes and strides only
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("polar.out", polar_out);
}

}  // namespace neuronsim::pytorch
