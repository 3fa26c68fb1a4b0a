// The example kernels of neuronsim::kernels (the shapes of
// neuronsim-make-kernels, plus a larger matmul for MFU), run on core 0 in
// functional_and_timing mode with deterministic pseudo-random inputs.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/kernels/eager.h"
#include "neuronsim/kernels/kernels.h"
#include "neuronsim/sim/random.h"
#include "neuronsim/sim/types.h"

namespace neuronsim::bench {
namespace {

using isa::DType;
namespace k = neuronsim::kernels;

constexpr uint64_t kSeed = 20250101;

// A contiguous view of `sizes`.
k::View view(DType dtype, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * sizes[d + 1];
  return k::View{dtype, std::move(sizes), std::move(strides)};
}

// Causal attention over contiguous [1, H, T, 128] bf16 heads, H / kv_heads query heads per
// KV head, with a 1/sqrt(128) scale.
isa::Program causal_attention(const std::string& target, int64_t heads, int64_t kv_heads,
                              int64_t tokens) {
  const k::View q = view(DType::bf16, {1, heads, tokens, 128});
  const k::View kv = view(DType::bf16, {1, kv_heads, tokens, 128});
  const k::View lse = view(DType::fp32, {1, heads, tokens});
  return k::attention(target, {q, kv, kv, q, lse}, 0.08838834764831845f, true);
}

// Its gradients, dq, dk and dv, at the same shapes.
isa::Program causal_attention_backward(const std::string& target, int64_t heads, int64_t kv_heads,
                                       int64_t tokens) {
  const k::View q = view(DType::bf16, {1, heads, tokens, 128});
  const k::View kv = view(DType::bf16, {1, kv_heads, tokens, 128});
  const k::View lse = view(DType::fp32, {1, heads, tokens});
  return k::attention_backward(target, {q, kv, kv, q, q, lse, q, kv, kv}, 0.08838834764831845f,
                               true);
}

std::string fixed(double v, int digits) {
  return fmt::format("{:.{}f}", v, digits);
}

}  // namespace

float InputFiller::next() {
  const uint64_t z = sim::splitmix64(state_);
  return static_cast<float>(z >> 40) * (1.0f / 8388608.0f) - 1.0f;  // 24 bits -> [-1, 1)
}

std::vector<KernelSpec> kernel_specs() {
  return {
      {"matmul_bf16_256x256x512", "c[256,512] fp32 = a[256,256] @ b[256,512], bf16 inputs",
       [](const std::string& t) { return k::matmul(t, 256, 256, 512, DType::bf16, DType::fp32); },
       true},
      {"matmul_bf16_1024x1024x1024", "c[1024,1024] fp32 = a[1024,1024] @ b[1024,1024], bf16 inputs",
       [](const std::string& t) {
         return k::matmul(t, 1024, 1024, 1024, DType::bf16, DType::fp32);
       },
       true},
      {"add_fp32_256x256", "out = x + y, [256,256] fp32",
       [](const std::string& t) { return k::elementwise(t, k::ElementwiseOp::add, 256, 256); },
       false},
      {"add_fp32_1024x2048",
       "out = x + y, [1024,2048] fp32: 8 tiles alternating VectorE and GpSimdE",
       [](const std::string& t) { return k::elementwise(t, k::ElementwiseOp::add, 1024, 2048); },
       false},
      {"softmax_fp32_256x256", "row softmax of x[256,256] fp32",
       [](const std::string& t) { return k::softmax(t, 256, 256, DType::fp32); }, false},
      {"softmax_fp32_1024x1024", "row softmax of x[1024,1024] fp32: 8 row tiles",
       [](const std::string& t) { return k::softmax(t, 1024, 1024, DType::fp32); }, false},
      {"rmsnorm_bf16_256x512", "rmsnorm of x[256,512] bf16, gamma[512], eps 1e-6",
       [](const std::string& t) { return k::rmsnorm(t, 256, 512, 1e-6f, DType::bf16); }, false},
      {"layernorm_fp32_128x768", "layernorm of x[128,768] fp32, gamma/beta[768], eps 1e-5",
       [](const std::string& t) { return k::layernorm(t, 128, 768, 1e-5f, DType::fp32); }, false},
      {"attention_bf16_causal_4x2048x128",
       "flash attention, causal, q [1,4,2048,128] bf16, 2 KV heads: PE transposes, online "
       "softmax on ACT/DVE",
       [](const std::string& t) { return causal_attention(t, 4, 2, 2048); }, true},
      {"attention_backward_bf16_causal_4x2048x128",
       "its gradients: probabilities recomputed on chip, dK and dV accumulated in PSUM",
       [](const std::string& t) { return causal_attention_backward(t, 4, 2, 2048); }, true},
      {"transpose_fp32_256x384", "out[384,256] = x[256,384]^T, fp32",
       [](const std::string& t) { return k::transpose(t, 256, 384, DType::fp32); }, false},
  };
}

namespace {

KernelResult run_kernel(const Platform& p, const KernelSpec& spec) {
  sim::DeviceOptions options;
  options.fail_on_nan = true;
  options.launch = false;  // the kernel body: its figures are against the engines' peaks
  sim::Device device(p.instance, p.generation, options);
  const sim::ProgramRef program = device.load(0, spec.build(p.generation.name), spec.name);
  const sim::Bindings io = device.allocate_io(*program);
  fill_inputs(device, *program, io, kSeed);
  const sim::RunResult r = *device.run({program, io, spec.name}).run;
  const sim::CoreStats& c = r.cores.at(0);

  KernelResult out;
  out.name = fmt::format("{}/{}", p.generation.name, spec.name);
  out.description = spec.description;
  out.instructions = program->program().num_instructions();
  out.total_ps = r.total_ps;
  out.total_act_cycles = static_cast<double>(r.total_ps) * p.generation.act_ghz / 1000.0;
  for (int e = 0; e < isa::kNumEngines; ++e)
    out.engine_busy_ps[static_cast<size_t>(e)] = c.engines[e].busy_ps;
  out.dma_bytes = c.dma_bytes;
  out.dma_transfers = c.dma_transfers;
  out.hbm_read_bytes = c.hbm_read_bytes;
  out.hbm_write_bytes = c.hbm_write_bytes;
  out.matmul_flops = c.matmul_flops;
  out.is_matmul = spec.is_matmul;
  // MFU: matmul FLOPs over what the core's PE could do at peak in the run's time.
  out.mfu_percent = r.total_ps == 0
                        ? 0.0
                        : 100.0 * static_cast<double>(c.matmul_flops) /
                              (static_cast<double>(r.total_ps) * r.peak_flops_per_core / 1e12);
  return out;
}

}  // namespace

void fill_inputs(sim::Device& device, const sim::LoadedProgram& program, const sim::Bindings& io,
                 uint64_t seed) {
  InputFiller rng(seed);
  for (const isa::TensorDecl& t : program.program().tensors) {
    if (t.kind != isa::TensorKind::input) continue;
    std::vector<float> values(t.num_elems());
    for (float& v : values) v = rng.next();
    std::vector<uint8_t> bytes(t.size_bytes());
    isa::convert_from_float(t.dtype, values.data(), bytes.data(), values.size());
    device.write_tensor(program, io, t.name, bytes);
  }
}

std::vector<KernelResult> run_kernels(const Platform& platform, const Selection& selection) {
  std::vector<KernelResult> out;
  for (const KernelSpec& s : kernel_specs())
    if (selection.selected(fmt::format("{}/{}", platform.generation.name, s.name)))
      out.push_back(run_kernel(platform, s));
  return out;
}

void append_measurements(const KernelResult& r, std::vector<Measurement>& out) {
  static constexpr const char* kEngines[] = {"pe", "act", "dve", "pool", "sp"};
  out.push_back({r.name, "total_ns", static_cast<double>(r.total_ps) / 1000.0});
  out.push_back({r.name, "total_act_cycles", r.total_act_cycles});
  out.push_back({r.name, "instructions", static_cast<double>(r.instructions)});
  for (size_t e = 0; e < r.engine_busy_ps.size(); ++e)
    out.push_back({r.name, fmt::format("{}_busy_ns", kEngines[e]),
                   static_cast<double>(r.engine_busy_ps[e]) / 1000.0});
  out.push_back({r.name, "dma_bytes", static_cast<double>(r.dma_bytes)});
  out.push_back({r.name, "dma_transfers", static_cast<double>(r.dma_transfers)});
  out.push_back({r.name, "hbm_read_bytes", static_cast<double>(r.hbm_read_bytes)});
  out.push_back({r.name, "hbm_write_bytes", static_cast<double>(r.hbm_write_bytes)});
  if (r.is_matmul) {
    out.push_back({r.name, "matmul_flops", static_cast<double>(r.matmul_flops)});
    out.push_back({r.name, "mfu_percent", r.mfu_percent});
  }
}

std::string kernel_table(const std::vector<KernelResult>& results, const Platform& p) {
  if (results.empty()) return "";
  size_t w = 9;
  for (const KernelResult& r : results) w = std::max(w, r.name.size());
  std::string out = fmt::format(
      "Example kernels on {} ({}), core 0, functional_and_timing; cycles at the ACT clock ({} "
      "GHz), busy in ns\n",
      p.instance.name, p.generation.name, p.generation.act_ghz);
  out += fmt::format(
      "{:<{}}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}\n",
      "benchmark", w, "instr", "total ns", "ACT cyc", "PE", "ACT", "DVE", "POOL", "SP", "DMA bytes",
      "MFU %");
  for (const KernelResult& r : results) {
    const auto ns = [](uint64_t ps) { return fixed(static_cast<double>(ps) / 1000.0, 1); };
    out += fmt::format(
        "{:<{}}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}\n",
        r.name, w, r.instructions, ns(r.total_ps), fixed(r.total_act_cycles, 0),
        ns(r.engine_busy_ps[0]), ns(r.engine_busy_ps[1]), ns(r.engine_busy_ps[2]),
        ns(r.engine_busy_ps[3]), ns(r.engine_busy_ps[4]), r.dma_bytes,
        r.is_matmul ? fixed(r.mfu_percent, 1) : "-");
  }
  return out;
}

}  // namespace neuronsim::bench
