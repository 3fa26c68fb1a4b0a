// Random draws on the device: uniform_, normal_, bernoulli_, exponential_, random_ (integers
// in a range), multinomial and randperm.
// - Every draw comes from the engines' XORWOW generators (PointwiseExpr::random, 16 bits a
//   step), seeded from the neuron generator's next key, so torch.manual_seed (or a
//   generator= argument) repeats them. The streams are not the CPU's, as CUDA's are not.
// - A uniform float has 24 random bits, (hi * 2^16 + lo with its low 8 bits cleared) / 2^32,
//   exact in FP32 and in [0, 1 - 2^-24], so no draw rounds up to 1.
// - normal_ is Box-Muller on ScalarE (log, sqrt, cos); exponential_ is -log(1 - u) / lambda;
//   bernoulli is u < p.
// - multinomial inverts the cumulative distribution on the device (one draw: the count of
//   cumulative sums <= u * total); without replacement it draws one category at a time and
//   zeroes it. It reads back one flag per call to raise torch's errors on bad inputs.
// - randperm sorts n uniform keys (kernels::topk).
// With NEURONSIM_RNG=cpu (RngSource::cpu, TorchNeuron's convention) the host draws instead,
// with the CPU's generator and the CPU op, and the values are copied to the device: a seeded
// run then gives the CPU's numbers. A neuron generator passed to an op still draws on the
// device.
#include <cmath>
#include <functional>
#include <numbers>

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <fmt/format.h>
#include <torch/library.h>

#include "aten/fallback.h"
#include "aten/kernel_call.h"
#include "aten/refusal.h"
#include "aten/timing_only.h"
#include "runtime/generator.h"

namespace neuronsim::pytorch {

namespace {

using isa::ActFunc;
using isa::AluOp;
using Expr = kernels::PointwiseExpr;
using Reg = Expr::Reg;

constexpr float kTwoTo16 = 65536.0f;
constexpr float kTwoToMinus32 = 1.0f / 4294967296.0f;

// A uniform draw in [0, 1 - 2^-24] with 24 random bits.
Reg uniform24(Expr& e) {
  const Reg hi = e.random(), lo = e.random();
  const Reg lo_top = e.alu(AluOp::subtract, lo, e.alu_imm(AluOp::mod, lo, 256.0f));
  const Reg bits = e.alu(AluOp::add, e.alu_imm(AluOp::multiply, hi, kTwoTo16), lo_top);
  return e.alu_imm(AluOp::multiply, bits, kTwoToMinus32);
}

// The generator a random op draws from: the given one when it is a neuron generator,
// the device's default one when none is given; nullopt (the op falls back, which raises
// torch's error) for another device's generator.
std::optional<std::optional<at::Generator>> neuron_generator(
    const std::optional<at::Generator>& g) {
  if (!g || !g->defined()) return std::optional<at::Generator>{};
  if (!is_neuron_generator(*g)) return std::nullopt;
  return std::optional<at::Generator>{*g};
}

// The host draws self's values as the CPU op `draw` would, from the CPU generator (the
// default one, or the CPU generator given), and copies them to the device: RngSource::cpu.
// False when the device draws (its own source, or a neuron generator given).
// Whether the host draws (RngSource::cpu) rather than the device: not for a neuron generator.
bool host_draws_for(const std::optional<at::Generator>& generator) {
  return rng_source() == RngSource::cpu && !(generator && is_neuron_generator(*generator));
}

using HostDraw = std::function<void(at::Tensor&, const std::optional<at::Generator>&)>;
bool host_draws(const at::Tensor& self, const std::optional<at::Generator>& generator,
                const HostDraw& draw) {
  if (!host_draws_for(generator)) return false;
  const at::TensorOptions host_options = self.options().device(at::kCPU);
  // The same strides, so that the CPU op fills the elements in the same order.
  at::Tensor host = self.is_non_overlapping_and_dense()
                        ? at::empty_strided(self.sizes(), self.strides(), host_options)
                        : at::empty(self.sizes(), host_options);
  draw(host, generator);
  at::Tensor(self).copy_(host);
  return true;
}

// self <- expr, drawn from `generator`, for a float or integer self the engines write.
bool draw_into(const char* op, const std::string& name, const Expr& e, const at::Tensor& self,
               const std::optional<at::Generator>& generator,
               const std::vector<at::Tensor>& inputs = {}) {
  const auto g = neuron_generator(generator);
  if (!g || !self.device().is_privateuseone() || !engine_dtype(self.scalar_type())) return false;
  if (self.is_non_overlapping_and_dense()) return run_pointwise(op, name, e, inputs, self, *g);
  at::Tensor dense = at::empty(self.sizes(), self.options());
  if (!run_pointwise(op, name, e, inputs, dense, *g)) return false;
  self.copy_(dense);
  return true;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.uniform_(from, to, g); }))
    return self;
  if (is_engine_float(self.scalar_type())) {
    Expr e;
    e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, uniform24(e), static_cast<float>(to - from)),
              static_cast<float>(from));
    if (draw_into("aten::uniform_", fmt::format("uniform {} {}", from, to), e, self, generator))
      return self;
  }
  return Fallback<ATEN_OP(uniform_)>::call(self, from, to, generator);
}

// Box-Muller: sqrt(-2 log(1 - u1)) * cos(2 pi u2), 1 - u1 in (0, 1].
at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.normal_(mean, std, g); }))
    return self;
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (is_engine_float(self.scalar_type())) {
    Expr e;
    const Reg u1 = uniform24(e), u2 = uniform24(e);
    const Reg log1 = e.activation(ActFunc::log, e.alu_imm(AluOp::subtract, u1, 1.0f, true));
    const Reg radius = e.activation(ActFunc::sqrt, e.alu_imm(AluOp::multiply, log1, -2.0f));
    const Reg angle = e.activation(ActFunc::cos, u2, static_cast<float>(2.0 * std::numbers::pi));
    const Reg z = e.alu(AluOp::multiply, radius, angle);
    e.alu_imm(AluOp::add, e.alu_imm(AluOp::multiply, z, static_cast<float>(std)),
              static_cast<float>(mean));
    if (draw_into("aten::normal_", fmt::format("normal {} {}", mean, std), e, self, generator))
      return self;
  }
  return Fallback<ATEN_OP(normal_)>::call(self, mean, std, generator);
}

// normal with a tensor mean or std, in the CPU's order of operations (Distributions.cpp): the
// output draws N(0, 1) (N(0, std) for a number std) by normal_, then is scaled by std and
// shifted by mean, so a CPU-generator run (NEURONSIM_RNG=cpu) gives the CPU's numbers. The
// check that std >= 0 reads one value on the host, as CUDA's does (not in timing-only mode).
void check_normal_std(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() > 0 && !values_unspecified())
    TORCH_CHECK(std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
}

bool normal_covers(const at::Tensor& like) {
  return like.device().is_privateuseone() && is_engine_float(like.scalar_type());
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std,
                               std::optional<at::Generator> generator) {
  if (normal_covers(mean)) {
    TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
    at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
    return out.normal_(0, std, generator).add_(mean);
  }
  return Fallback<ATEN_OP2(normal, Tensor_float)>::call(mean, std, generator);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std,
                               std::optional<at::Generator> generator) {
  if (normal_covers(std)) {
    check_normal_std(std);
    at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
    return out.normal_(0, 1, generator).mul_(std).add_(mean);
  }
  return Fallback<ATEN_OP2(normal, float_Tensor)>::call(mean, std, generator);
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                std::optional<at::Generator> generator) {
  if (normal_covers(mean) && std.device() == mean.device() && is_engine_float(std.scalar_type())) {
    check_normal_std(std);
    at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options(),
                               at::MemoryFormat::Contiguous);
    return out.normal_(0, 1, generator).mul_(std).add_(mean);
  }
  return Fallback<ATEN_OP2(normal, Tensor_Tensor)>::call(mean, std, generator);
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.exponential_(lambd, g); }))
    return self;
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  if (is_engine_float(self.scalar_type())) {
    Expr e;
    const Reg log1 =
        e.activation(ActFunc::log, e.alu_imm(AluOp::subtract, uniform24(e), 1.0f, true));
    e.alu_imm(AluOp::multiply, log1, static_cast<float>(-1.0 / lambd));
    if (draw_into("aten::exponential_", fmt::format("exponential {}", lambd), e, self, generator))
      return self;
  }
  return Fallback<ATEN_OP(exponential_)>::call(self, lambd, generator);
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.bernoulli_(p, g); }))
    return self;
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  Expr e;
  e.alu_imm(AluOp::is_lt, uniform24(e), static_cast<float>(p));
  if (draw_into("aten::bernoulli_", fmt::format("bernoulli {}", p), e, self, generator))
    return self;
  return Fallback<ATEN_OP2(bernoulli_, float)>::call(self, p, generator);
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.bernoulli_(p.cpu(), g); }))
    return self;
  if (p.device() == self.device() && is_engine_float(p.scalar_type()) &&
      at::is_expandable_to(p.sizes(), self.sizes())) {
    Expr e;
    e.alu(AluOp::is_lt, uniform24(e), e.load(0));
    if (draw_into("aten::bernoulli_", "bernoulli tensor", e, self, generator, {p})) return self;
  }
  return Fallback<ATEN_OP2(bernoulli_, Tensor)>::call(self, p, generator);
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (host_draws(out, generator,
                 [&](at::Tensor& h, const auto& g) { h.copy_(at::bernoulli(self.cpu(), g)); }))
    return out;
  if (is_engine_float(self.scalar_type())) {
    Expr e;
    e.alu(AluOp::is_lt, uniform24(e), e.load(0));
    if (draw_into("aten::bernoulli", "bernoulli tensor", e, out, generator, {self})) return out;
  }
  return Fallback<ATEN_OP(bernoulli)>::call(self, generator);
}

// Integers in [from, to): floor(u * (to - from)) + from, for ranges FP32 counts exactly.
bool random_range_into(const char* op, at::Tensor& self, double from, double to,
                       const std::optional<at::Generator>& generator) {
  const double range = to - from;
  if (range <= 0 || range > (1 << 24) || std::abs(from) > (1 << 24) || std::abs(to) > (1 << 24) + 1)
    return false;
  Expr e;
  const Reg scaled = e.alu_imm(AluOp::multiply, uniform24(e), static_cast<float>(range));
  const Reg whole = e.alu(AluOp::subtract, scaled, e.alu_imm(AluOp::mod, scaled, 1.0f));
  e.alu_imm(AluOp::add, e.alu_imm(AluOp::min, whole, static_cast<float>(range - 1)),
            static_cast<float>(from));
  if (engine_dtype(self.scalar_type()))
    return draw_into(op, fmt::format("random {} {}", from, to), e, self, generator);
  // int64: drawn as FP32, then cast on the device (exact below 2^24).
  at::Tensor drawn = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  if (!draw_into(op, fmt::format("random {} {}", from, to), e, drawn, generator)) return false;
  self.copy_(drawn);
  return true;
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.random_(from, to, g); }))
    return self;
  if (to && random_range_into("aten::random_", self, static_cast<double>(from),
                              static_cast<double>(*to), generator))
    return self;
  return Fallback<ATEN_OP2(random_, from)>::call(self, from, to, generator);
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  if (host_draws(self, generator, [&](at::Tensor& h, const auto& g) { h.random_(to, g); }))
    return self;
  if (random_range_into("aten::random_", self, 0.0, static_cast<double>(to), generator))
    return self;
  return Fallback<ATEN_OP2(random_, to)>::call(self, to, generator);
}

// ---- multinomial and randperm ---------------------------------------------------------

constexpr int64_t kMaxDrawsWithoutReplacement = 64;

// Raises torch's errors for a distribution that is not one: negative, inf or NaN
// probabilities, a row without mass, or fewer categories than draws without replacement.
// One read of the device per call (CUDA asserts on the device instead).
void check_distribution(const at::Tensor& probs, const at::Tensor& totals, int64_t draws,
                        bool replacement) {
  if (values_unspecified()) return;
  at::Tensor flags =
      at::stack({(probs < 0).any(), probs.isfinite().logical_not().any(), (totals <= 0).any(),
                 (probs > 0).to(at::kFloat).sum(-1).lt(draws).any()})
          .cpu();
  const auto* f = flags.data_ptr<bool>();
  TORCH_CHECK(!f[0], "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!f[1], "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!f[2], "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  TORCH_CHECK(replacement || !f[3],
              "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
              "replacement (not enough categories with a non-zero probability)");
}

// One draw per (row, column of u) from the rows of probs [rows, n]: the number of
// cumulative sums <= u * total, as int64 [rows, draws].
at::Tensor invert_cdf(const at::Tensor& cdf, const at::Tensor& totals, const at::Tensor& u) {
  const at::Tensor target = u * totals.unsqueeze(-1);                  // [rows, draws]
  const at::Tensor below = cdf.unsqueeze(1).le(target.unsqueeze(-1));  // [rows, draws, n]
  const at::Tensor count = below.to(at::kFloat).sum(-1);
  return count.clamp_max(static_cast<double>(cdf.size(-1) - 1)).to(at::kLong);
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> generator) {
  const char* op = "aten::multinomial";
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= n,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  if (host_draws_for(generator))
    return at::multinomial(self.cpu(), n_sample, replacement, generator).to(self.device());
  const auto g = neuron_generator(generator);
  const bool covered = g && is_engine_float(self.scalar_type()) && n < (1 << 24) &&
                       (replacement || n_sample <= kMaxDrawsWithoutReplacement);
  if (!covered) {
    if (!replacement && n_sample > kMaxDrawsWithoutReplacement)
      note_refusal(op, fmt::format("{} draws without replacement (at most {} on the device)",
                                   n_sample, kMaxDrawsWithoutReplacement));
    return Fallback<ATEN_OP(multinomial)>::call(self, n_sample, replacement, generator);
  }
  at::Tensor probs = self.reshape({-1, n}).to(at::kFloat);
  const int64_t rows = probs.size(0);
  at::Tensor cdf = probs.cumsum(-1);
  at::Tensor totals = cdf.select(-1, n - 1);
  check_distribution(probs, totals, n_sample, replacement);
  at::Tensor result;
  if (replacement) {
    at::Tensor u = at::empty({rows, n_sample}, probs.options());
    pytorch::uniform_(u, 0.0, 1.0, *g);
    result = invert_cdf(cdf, totals, u);
  } else {
    std::vector<at::Tensor> picks;
    for (int64_t k = 0; k < n_sample; ++k) {
      if (k > 0) {
        cdf = probs.cumsum(-1);
        totals = cdf.select(-1, n - 1);
      }
      at::Tensor u = at::empty({rows, 1}, probs.options());
      pytorch::uniform_(u, 0.0, 1.0, *g);
      picks.push_back(invert_cdf(cdf, totals, u));
      if (k + 1 < n_sample) probs = probs.scatter(1, picks.back(), 0.0);
    }
    result = at::cat(picks, 1);
  }
  return self.dim() == 1 ? result.reshape({n_sample}) : result;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> generator, at::Tensor& out) {
  at::Tensor result = pytorch::multinomial(self, n_sample, replacement, generator);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// A permutation of [0, n): the order of n uniform keys (a stable sort, so ties, two equal
// 24-bit keys, keep their positions).
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  if (out.device().is_privateuseone() && host_draws_for(generator)) {
    at::native::resize_output(out, {n});
    host_draws(out, generator, [&](at::Tensor& h, const auto& g) { at::randperm_out(h, n, g); });
    return out;
  }
  const auto g = neuron_generator(generator);
  if (g && out.device().is_privateuseone() && n < (1 << 24) &&
      (out.scalar_type() == at::kLong || out.scalar_type() == at::kInt)) {
    at::native::resize_output(out, {n});
    if (n == 0) return out;
    at::Tensor keys = at::empty({n}, out.options().dtype(at::kFloat));
    pytorch::uniform_(keys, 0.0, 1.0, *g);
    at::Tensor order = std::get<1>(keys.sort(/*stable=*/true, 0, false));
    out.copy_(order);
    return out;
  }
  return Fallback<ATEN_OP2(randperm, generator_out)>::call(n, generator, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("normal.Tensor_float", normal_tensor_float);
  m.impl("normal.float_Tensor", normal_float_tensor);
  m.impl("normal.Tensor_Tensor", normal_tensor_tensor);
  m.impl("exponential_", exponential_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("bernoulli", bernoulli);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
  m.impl("randperm.generator_out", randperm_out);
}

}  // namespace neuronsim::pytorch
