// Shared plumbing of the backend's aten kernels (see kernel_call.h).
#include "aten/kernel_call.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "aten/refusal.h"
#include "neuronsim/sim/random.h"
#include "runtime/backend.h"
#include "runtime/generator.h"
#include "runtime/place.h"

namespace neuronsim::pytorch {

std::optional<isa::DType> engine_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return isa::DType::fp32;
    case at::kBFloat16:
      return isa::DType::bf16;
    case at::kHalf:
      return isa::DType::fp16;
    case at::kChar:
      return isa::DType::int8;
    case at::kByte:
      return isa::DType::uint8;
    case at::kShort:
      return isa::DType::int16;
    case at::kUInt16:
      return isa::DType::uint16;
    case at::kInt:
      return isa::DType::int32;
    case at::kBool:
      return isa::DType::boolean;
    default:
      return std::nullopt;
  }
}

bool is_engine_float(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

bool exact_in_fp32(c10::ScalarType t) {
  return is_engine_float(t) || t == at::kChar || t == at::kByte || t == at::kShort ||
         t == at::kBool;
}

kernels::View view_of(const at::Tensor& t) {
  kernels::View v;
  v.dtype = *engine_dtype(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  return v;
}

std::string layout_key(const at::Tensor& t) {
  return fmt::format("{}[{}:{}]", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ","),
                     fmt::join(t.strides(), ","));
}

int op_device(const char* op, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor& t : tensors) {
    if (!device) device = t.device();
    if (t.device() != *device)
      fail(fmt::format("{}: expected all tensors on one device, but found {} and {}", op,
                       device->str(), t.device().str()));
  }
  return device ? device->index() : 0;
}

int op_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  std::vector<at::Tensor> all;
  for (const at::Tensor* t : tensors) all.push_back(*t);
  return op_device(op, all);
}

bool run_kernel(const char* op, int device, const std::string& key,
                const std::function<isa::Program()>& build,
                const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  Backend& b = Backend::get();
  std::string refusal;
  const sim::ProgramRef program = b.program(device, key, build, &refusal);
  if (!program) {
    note_refusal(op, refusal);
    return false;
  }
  b.run_kernel(op, program, bindings_of(tensors));
  return true;
}

bool run_kernel_once(const char* op, int device, const std::function<isa::Program()>& build,
                     const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  Backend& b = Backend::get();
  isa::Program built;
  try {
    built = build();
  } catch (const std::invalid_argument& refused) {
    note_refusal(op, refused.what());
    return false;
  }
  const sim::ProgramRef program = b.load(device, std::move(built), op);
  b.run_kernel(op, program, bindings_of(tensors));
  return true;
}

at::Tensor wrapped_number(const at::Scalar& v) {
  at::Tensor t = at::scalar_to_tensor(v);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

at::Tensor device_scalar(float v, const c10::Device& device) {
  constexpr int64_t kSlots = 4096;
  struct Ring {
    at::Tensor slots;
    int64_t next = 0;
  };
  static std::mutex mu;
  static auto* rings = new std::map<int, Ring>;  // never freed: no release after the device
  std::lock_guard<std::mutex> lock(mu);
  Ring& ring = (*rings)[device.index()];
  if (!ring.slots.defined())
    ring.slots = at::empty({kSlots}, at::TensorOptions().dtype(at::kFloat).device(device));
  const int64_t k = ring.next++ % kSlots;
  static_cast<float*>(ring.slots.data_ptr())[k] = v;  // device memory is host-mapped
  at::Tensor scalar = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(ring.slots.storage()), ring.slots.key_set(), ring.slots.dtype());
  scalar.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef{}, c10::IntArrayRef{}, k);
  return scalar;
}

at::Tensor random_seeds(const c10::Device& device, uint64_t numel,
                        const std::optional<at::Generator>& generator) {
  constexpr int64_t kLanes = 128, kWords = kernels::PointwiseExpr::kSeedWords;
  at::Tensor seeds =
      at::empty({kLanes, kWords}, at::TensorOptions().dtype(at::kInt).device(device));
  uint64_t stream = next_random_key(
      generator && generator->defined() ? *generator : default_generator(device.index()), numel);
  auto* words = static_cast<uint32_t*>(seeds.data_ptr());  // device memory is host-mapped
  for (int64_t lane = 0; lane < kLanes; ++lane)
    for (int64_t engine = 0; engine < kWords / 6; ++engine) {
      const sim::Xorwow g = sim::Xorwow::seeded(stream);
      std::copy(g.words.begin(), g.words.end(), words + lane * kWords + engine * 6);
    }
  return seeds;
}

std::string target() {
  return Backend::get().target();
}

namespace {

// The bytes from a view's first element to its last one, [first, end).
std::pair<uint64_t, uint64_t> byte_span(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  const auto first = reinterpret_cast<uint64_t>(t.data_ptr());
  return {first, first + static_cast<uint64_t>(last + 1) * t.element_size()};
}

}  // namespace

at::Tensor flat_dense(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return c.as_strided({c.numel()}, {1});
}

bool overlaps(const at::Tensor& in, const at::Tensor& out) {
  if (!in.is_alias_of(out) || in.numel() == 0 || out.numel() == 0) return false;
  if (in.data_ptr() == out.data_ptr() && in.sizes() == out.sizes() &&
      in.strides() == out.strides() && in.dtype() == out.dtype())
    return false;
  const auto [a0, a1] = byte_span(in);
  const auto [b0, b1] = byte_span(out);
  return a0 < b1 && b0 < a1;  // apart when their spans are (rows of one matrix)
}

bool run_pointwise(const char* op, const std::string& name, const kernels::PointwiseExpr& expr,
                   const std::vector<at::Tensor>& inputs, const at::Tensor& out,
                   const std::optional<at::Generator>& generator) {
  for (const at::Tensor& in : inputs)
    if (overlaps(in, out)) return false;
  return run_pointwise_outputs(op, name, expr, inputs, {out}, generator);
}

namespace {

// Views that keep more dims than one DMA access pattern walks (a 3-D convolution's
// windows, [B, C, O..., K...]) run in slices. Not for expressions of positions (each
// slice would restart them) or of random draws (each slice would repeat them).
bool walks_too_many_dims(const kernels::PointwiseExpr& expr,
                         const std::vector<kernels::View>& inputs,
                         const std::vector<kernels::View>& outs) {
  for (const kernels::PointwiseExpr::Step& s : expr.steps())
    if (s.op == kernels::PointwiseExpr::Op::position || s.op == kernels::PointwiseExpr::Op::random)
      return false;
  std::vector<kernels::View> all = outs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  for (const kernels::View& v : all)
    if (v.sizes != all[0].sizes) return false;  // the kernel's own refusal
  return kernels::walk_dims(std::move(all)) > kernels::kMaxWalkDims;
}

// The op once per index of the outputs' outermost dim (the largest stride of a dim longer
// than 1), each slice coalescing to one dim fewer. The slices share one layout, so they
// share one kernel: a refusal can only come at the first, before anything is written.
bool run_pointwise_in_slices(const char* op, const std::string& name,
                             const kernels::PointwiseExpr& expr,
                             const std::vector<at::Tensor>& inputs,
                             const std::vector<at::Tensor>& outs) {
  int64_t dim = -1;
  for (int64_t d = 0; d < outs[0].dim(); ++d)
    if (outs[0].size(d) > 1 && (dim < 0 || outs[0].stride(d) > outs[0].stride(dim))) dim = d;
  if (dim < 0) return false;
  for (int64_t i = 0; i < outs[0].size(dim); ++i) {
    std::vector<at::Tensor> in_slices, out_slices;
    for (const at::Tensor& t : inputs) in_slices.push_back(t.select(dim, i));
    for (const at::Tensor& t : outs) out_slices.push_back(t.select(dim, i));
    if (!run_pointwise_outputs(op, name, expr, in_slices, out_slices)) {
      TORCH_CHECK(i == 0, op, ": slice ", i, " of dim ", dim,
                  " was refused after the first ran (an inconsistent layout)");
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// What identifies an expression: its steps and outputs, immediates included.
std::string expr_key(const kernels::PointwiseExpr& expr) {
  std::string key;
  for (const kernels::PointwiseExpr::Step& s : expr.steps())
    key += fmt::format("{}:{}:{}:{}:{}:{}:{}:[{}];", static_cast<int>(s.op), fmt::join(s.args, ","),
                       s.input, static_cast<int>(s.func), static_cast<int>(s.alu), s.imm, s.reverse,
                       fmt::join(s.weights, ","));
  return key + fmt::format("->{}", fmt::join(expr.outputs(), ","));
}

}  // namespace

bool run_pointwise_outputs(const char* op, const std::string& name,
                           const kernels::PointwiseExpr& expr,
                           const std::vector<at::Tensor>& inputs,
                           const std::vector<at::Tensor>& outs,
                           const std::optional<at::Generator>& generator) {
  for (const at::Tensor& out : outs)
    if (!out.device().is_privateuseone() || !engine_dtype(out.scalar_type())) return false;
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outs.begin(), outs.end());
  const int device = op_device(op, all);
  if (outs[0].numel() == 0) return true;
  std::vector<at::Tensor> expanded;
  std::vector<kernels::View> views, out_views;
  // The expression itself is part of the key: a name that leaves out an immediate (a
  // diagonal, a bound) must not find the kernel built for another value.
  std::string key = fmt::format("{} {} {} ->", op, name, expr_key(expr));
  for (const at::Tensor& out : outs) {
    out_views.push_back(view_of(out));
    key += layout_key(out);
  }
  for (const at::Tensor& in : inputs) {
    if (!engine_dtype(in.scalar_type())) return false;
    expanded.push_back(in.expand(outs[0].sizes()));
    views.push_back(view_of(expanded.back()));
    key += " " + layout_key(expanded.back());
  }
  if (walks_too_many_dims(expr, views, out_views))
    return run_pointwise_in_slices(op, name, expr, expanded, outs);
  std::vector<std::pair<std::string, at::Tensor>> bound;
  for (size_t i = 0; i < expanded.size(); ++i)
    bound.emplace_back(fmt::format("in{}", i), expanded[i]);
  if (expr.draws_random())
    bound.emplace_back("seeds", random_seeds(outs[0].device(), outs[0].numel(), generator));
  const std::string chip = target();
  if (outs.size() == 1) {
    bound.emplace_back("out", outs[0]);
    return run_kernel(
        op, device, key, [&] { return kernels::pointwise(chip, expr, views, out_views[0]); },
        bound);
  }
  for (size_t k = 0; k < outs.size(); ++k) bound.emplace_back(fmt::format("out{}", k), outs[k]);
  return run_kernel(
      op, device, key, [&] { return kernels::pointwise(chip, expr, views, out_views); }, bound);
}

bool copy_by_runs(const at::Tensor& src_in, const at::Tensor& dst) {
  constexpr int64_t kMaxRuns = 64;
  if (src_in.scalar_type() != dst.scalar_type() || !src_in.device().is_privateuseone() ||
      !dst.device().is_privateuseone())
    return false;
  if (dst.numel() == 0) return true;
  const at::Tensor src = src_in.expand(dst.sizes());
  // The innermost dims contiguous in both views make one run.
  int64_t run = 1, d = dst.dim() - 1;
  for (; d >= 0; --d) {
    if (dst.size(d) == 1) continue;
    if (src.stride(d) != run || dst.stride(d) != run) break;
    run *= dst.size(d);
  }
  const int64_t runs = dst.numel() / run;
  if (runs > kMaxRuns) return false;
  const DevicePlace s = device_place(src), t = device_place(dst);
  const uint64_t esize = dst.element_size();
  Backend& b = Backend::get();
  std::vector<int64_t> index(static_cast<size_t>(d + 1), 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t src_off = 0, dst_off = 0;
    for (int64_t k = 0; k <= d; ++k) {
      src_off += index[static_cast<size_t>(k)] * src.stride(k);
      dst_off += index[static_cast<size_t>(k)] * dst.stride(k);
    }
    b.copy(dst.device().index(), t.address + static_cast<uint64_t>(dst_off) * esize,
           src.device().index(), s.address + static_cast<uint64_t>(src_off) * esize,
           static_cast<uint64_t>(run) * esize);
    for (int64_t k = d; k >= 0; --k) {  // next outer index, last dim fastest
      if (++index[static_cast<size_t>(k)] < dst.size(k)) break;
      index[static_cast<size_t>(k)] = 0;
    }
  }
  return true;
}

bool run_reduce(const char* op, kernels::ReduceOp reduce, const at::Tensor& in, int64_t dim,
                const at::Tensor& out) {
  if (!engine_dtype(in.scalar_type()) || !engine_dtype(out.scalar_type())) return false;
  const int device = op_device(op, {&in, &out});
  if (out.numel() == 0) return true;
  if (in.numel() == 0) return false;  // torch's identities (0, -inf, errors): the CPU's
  const kernels::View in_view = view_of(in), out_view = view_of(out);
  const std::string chip = target();
  return run_kernel(op, device,
                    fmt::format("{} {} dim={} {} ->{}", op, static_cast<int>(reduce), dim,
                                layout_key(in), layout_key(out)),
                    [&] { return kernels::reduce(chip, reduce, in_view, dim, out_view); },
                    {{"in", in}, {"out", out}});
}

bool run_cumsum(const char* op, const at::Tensor& in, int64_t dim, const at::Tensor& out,
                bool product) {
  if (!engine_dtype(in.scalar_type()) || !engine_dtype(out.scalar_type())) return false;
  const int device = op_device(op, {&in, &out});
  if (out.numel() == 0) return true;
  const kernels::View in_view = view_of(in), out_view = view_of(out);
  const std::string chip = target();
  return run_kernel(op, device,
                    fmt::format("{} dim={} {} ->{}", op, dim, layout_key(in), layout_key(out)),
                    [&] {
                      return product ? kernels::cumprod(chip, in_view, dim, out_view)
                                     : kernels::cumsum(chip, in_view, dim, out_view);
                    },
                    {{"in", in}, {"out", out}});
}

at::Tensor meta_twin(const at::Tensor& x) {
  return at::empty(x.sizes(), x.options().device(at::kMeta));
}

std::optional<at::Tensor> int64_low_words(const at::Tensor& int64) {
  if (!int64.is_contiguous()) return std::nullopt;
  at::Tensor words = flat_dense(int64).view(at::kInt);
  if (words.numel() > 0) {
    const kernels::View all = view_of(words);
    const std::string chip = target();
    if (!run_kernel("aten::zero_", int64.device().index(),
                    fmt::format("aten::zero_ int64 {}", layout_key(words)),
                    [&] { return kernels::fill(chip, all, 0.0f); }, {{"out", words}}))
      return std::nullopt;
  }
  return words.slice(0, 0, c10::nullopt, 2).view(int64.sizes());
}

}  // namespace neuronsim::pytorch
