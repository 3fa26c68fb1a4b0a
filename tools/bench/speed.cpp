// --speed: how fast the simulator runs on this host. Machine dependent and never
// gated; the figures that mean something across machines are the ratios, all
// measured in one run: functional_and_timing against functional_only on the same
// kernel, and the functional matmul against the host's BLAS on the same shape.
#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>

#include "benchmarks.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/kernels/kernels.h"
#include "neuronsim/sim/functional.h"
#include "neuronsim/sim/simulator.h"

namespace neuronsim::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `fn`: one warm-up call, then calls until `min_seconds` have passed (at least
// 2).
template <typename Fn>
double seconds_per_call(Fn&& fn, double min_seconds) {
  fn();
  int calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds || calls < 2);
  return elapsed / calls;
}

std::string rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f} M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f} k", per_second / 1e3);
  return fmt::format("{:.0f} ", per_second);
}

// Host cost of one execution of a small kernel through sim::Device, as every entrance pays it:
// Device::run (enqueue, simulate, complete) and Device::enqueue alone (the worker drains the
// queue meanwhile), by mode.
std::string per_execution(const Platform& p) {
  const isa::Program program =
      kernels::elementwise(p.generation.name, kernels::ElementwiseOp::add, 128, 512);
  std::string out = fmt::format(
      "Host cost per execution of a {}-instruction kernel (add [128,512] fp32) through "
      "sim::Device, median\n",
      program.num_instructions());
  out += fmt::format("  {:<24} {:>14} {:>18}\n", "mode", "run µs", "enqueue µs");
  for (const sim::Mode mode :
       {sim::Mode::functional_only, sim::Mode::timing_only, sim::Mode::functional_and_timing}) {
    sim::DeviceOptions options;
    options.mode = mode;
    sim::Device device(p.instance, p.generation, options);
    const sim::ProgramRef loaded = device.load(0, program, "add");
    const sim::Bindings io = device.allocate_io(*loaded);
    const double run = median_us(1000, [&] { device.run({loaded, io, "add"}); });
    const double enqueue = median_us(1000, [&] { device.enqueue({loaded, io, "add"}); });
    device.synchronize();
    out += fmt::format("  {:<24} {:>14.1f} {:>18.2f}\n", sim::mode_name(mode), run, enqueue);
  }
  return out + "\n";
}

// A kernel of about `n` instructions: row tiles of an HBM tensor loaded, squared, shifted and
// stored, on 4 rotating SBUF tiles (the shape of the library's pipelined kernels).
isa::Program pipelined_kernel(const std::string& target, size_t n) {
  isa::KernelBuilder kb(target);
  constexpr uint32_t kTilesPerTensor = 256;  // [32768, 64]: within one access pattern's reach
  const size_t tiles = std::max<size_t>(n / 4, 1);
  std::vector<isa::AccessPattern> sbuf;
  for (int i = 0; i < 4; ++i) sbuf.push_back(kb.sbuf_tile(isa::DType::fp32, 128, 64));
  isa::AccessPattern x, y;
  for (size_t t = 0; t < tiles; ++t) {
    const uint32_t in_tensor = static_cast<uint32_t>(t % kTilesPerTensor);
    if (in_tensor == 0) {
      const std::string k = std::to_string(t / kTilesPerTensor);
      x = kb.input("x" + k, isa::DType::fp32, {int64_t{kTilesPerTensor} * 128, 64});
      y = kb.output("y" + k, isa::DType::fp32, {int64_t{kTilesPerTensor} * 128, 64});
    }
    const isa::AccessPattern& tile = sbuf[t % 4];
    kb.dma_copy(tile, isa::rows(x, in_tensor * 128, 128));
    kb.activation(tile, tile, isa::ActFunc::square);
    kb.tensor_scalar(isa::Engine::DVE, tile, tile, isa::AluOp::add, 1.0f);
    kb.dma_copy(isa::rows(y, in_tensor * 128, 128), tile);
  }
  return kb.finish();
}

// KernelBuilder's speed at 1 k and 100 k instructions: it should be linear in the
// instructions, so the ratio of the two rates should stay near 1.
std::string builder_speed(const Platform& p, double min_seconds) {
  std::string out =
      "KernelBuilder: instructions built per host second (emit, semaphores, finish)\n";
  double small_rate = 0;
  for (const size_t n : {size_t{1000}, size_t{100000}}) {
    size_t built = 0;
    // The fastest of 5 rounds: on a shared virtual machine one round can run at half speed,
    // and the ratio of the two sizes is the figure (the builder's cost per instruction).
    double s = std::numeric_limits<double>::infinity();
    for (int round = 0; round < 5; ++round)
      s = std::min(s,
                   seconds_per_call(
                       [&] { built = pipelined_kernel(p.generation.name, n).num_instructions(); },
                       n > 1000 ? 0 : min_seconds / 5));
    const double per_s = static_cast<double>(built) / s;
    if (n == 1000) small_rate = per_s;
    out += fmt::format("  {:>7} instructions  {:>10}/s", built, rate(per_s));
    out += n == 1000 ? "\n" : fmt::format("  ({:.2f} x the rate at 1 k)\n", per_s / small_rate);
  }
  return out + "\n";
}

constexpr int kMatmuls = 64;  // [128x128] x [128x512] per program / BLAS batch
constexpr int kM = 128, kK = 128, kN = 512;

}  // namespace

std::string run_speed(const Platform& p, double min_seconds) {
  std::string out = fmt::format(
      "Host speed (--speed; machine dependent, never gated): {} hardware threads, >= {} s per "
      "figure\n",
      std::thread::hardware_concurrency(), min_seconds);

  out += per_execution(p);
  out += nrt_speed(p);
  out += builder_speed(p, min_seconds);

  // ---- simulated instructions per host second, by mode, on each example kernel ----
  out += fmt::format("{:<34}  {:>6}  {:>14}  {:>14}  {:>14}  {:>10}\n", "kernel", "instr",
                     "func+timing/s", "functional/s", "timing only/s", "F+T / F");
  double total_instr = 0, total_ft = 0, total_f = 0, total_t = 0;
  for (const KernelSpec& spec : kernel_specs()) {
    const isa::Program program = spec.build(p.generation.name);
    // One device per mode, each running the kernel through its queue as every caller does.
    const auto run = [&](sim::Mode mode) {
      sim::DeviceOptions options;
      options.mode = mode;
      sim::Device device(p.instance, p.generation, options);
      const sim::ProgramRef loaded = device.load(0, program, spec.name);
      const sim::Bindings io = device.allocate_io(*loaded);
      fill_inputs(device, *loaded, io, 7);
      return seconds_per_call([&] { device.run({loaded, io, spec.name}); }, min_seconds);
    };
    const double ft = run(sim::Mode::functional_and_timing);
    const double f = run(sim::Mode::functional_only);
    const double t = run(sim::Mode::timing_only);
    const double n = static_cast<double>(program.num_instructions());
    total_instr += n;
    total_ft += ft;
    total_f += f;
    total_t += t;
    out += fmt::format("{:<34}  {:>6}  {:>14}  {:>14}  {:>14}  {:>10.3f}\n", spec.name,
                       program.num_instructions(), rate(n / ft), rate(n / f), rate(n / t), f / ft);
  }
  out += fmt::format("{:<34}  {:>6}  {:>14}  {:>14}  {:>14}  {:>10.3f}\n", "all kernels",
                     total_instr, rate(total_instr / total_ft), rate(total_instr / total_f),
                     rate(total_instr / total_t), total_f / total_ft);
  out +=
      "(F+T / F: speed of functional_and_timing relative to functional_only; below 1 is the cost "
      "of the "
      "timing model)\n\n";

  // ---- functional matmul against the host BLAS on the same shape ----
  out += fmt::format(
      "Functional matmul vs host BLAS: {} x [{}x{}]x[{}x{}] (M x K, K x N), 1 BLAS thread\n",
      kMatmuls, kM, kK, kK, kN);
  const double flops = double(kMatmuls) * 2.0 * kM * kK * kN;
  openblas_set_num_threads(1);  // as the functional plane does (sim/src/functional.cpp)
  std::vector<float> a(size_t{kK} * kM), b(size_t{kK} * kN), c(size_t{kM} * kN);
  InputFiller rng(11);
  for (float& v : a) v = rng.next();
  for (float& v : b) v = rng.next();
  const double blas_s = seconds_per_call(
      [&] {
        for (int i = 0; i < kMatmuls; ++i)
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kM, kN, kK, 1.0f, a.data(), kM,
                      b.data(), kN, 0.0f, c.data(), kN);
      },
      min_seconds);
  const double blas_gflops = flops / blas_s / 1e9;
  out += fmt::format("  {:<44} {:>9.2f} GFLOP/s\n", "cblas_sgemm (fp32)", blas_gflops);

  for (const isa::DType dt : {isa::DType::bf16, isa::DType::fp32}) {
    const std::string d = dt == isa::DType::bf16 ? "bf16" : "fp32";
    std::string text = fmt::format(".target {}\n", p.generation.name);
    for (int i = 0; i < kMatmuls; ++i)
      text += fmt::format(
          "pe matmul dst=psum.fp32[0:128]+{}[[1,{}]] stationary=sbuf.{}[0:128]+0[[1,{}]] "
          "moving=sbuf.{}[0:128]+1024[[1,{}]]\n",
          (i % 8) * 2048, kN, d, kM, d, kN);
    const isa::Program program = isa::assemble(text, "speed_matmul.s");
    // The engine room itself, on purpose: operands preloaded in SBUF, so the figure is the
    // functional TensorE alone, with no DMA and no queue around it.
    sim::Simulator simulator(p.instance, p.generation);
    sim::CoreState& state = simulator.core(0);
    const size_t es = isa::dtype_size(dt);
    std::vector<float> row(kN);
    std::vector<uint8_t> bytes(kN * es);
    for (uint32_t part = 0; part < 128; ++part) {
      for (float& v : row) v = rng.next();
      isa::convert_from_float(dt, row.data(), bytes.data(), kM);
      std::copy(bytes.begin(), bytes.begin() + static_cast<long>(kM * es), state.sbuf.at(part, 0));
      isa::convert_from_float(dt, row.data(), bytes.data(), kN);
      std::copy(bytes.begin(), bytes.end(), state.sbuf.at(part, 1024));
    }
    simulator.load(0, program);
    for (const sim::Mode mode : {sim::Mode::functional_only, sim::Mode::functional_and_timing}) {
      const double s = seconds_per_call([&] { simulator.run(run_options(mode)); }, min_seconds);
      const double gflops = flops / s / 1e9;
      out += fmt::format("  {:<44} {:>9.2f} GFLOP/s  = {:.3f} x BLAS\n",
                         fmt::format("simulator {} matmul, {}", d,
                                     mode == sim::Mode::functional_only ? "functional_only"
                                                                        : "functional_and_timing"),
                         gflops, gflops / blas_gflops);
    }
  }
  return out;
}

}  // namespace neuronsim::bench
