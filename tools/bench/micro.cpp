// Microbenchmarks: long streams of one kind of instruction (or DMA) on an
// otherwise idle core, run in timing_only mode, against the theoretical rate
// of the engine, the DMA engines or the chip's HBM. The programs are written
// in assembly (docs/isa.md §8), without semaphores: every instruction of a
// stream is independent of the previous one unless the benchmark says otherwise.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks.h"
#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/sim/types.h"

namespace neuronsim::bench {
namespace {

using isa::Engine;

constexpr int kStream = 256;  // instructions per compute stream
constexpr int kDmaCopies = 64;

enum class Kind { flops, elems, bytes };

struct Spec {
  std::string name;  // without the generation prefix
  std::string group;
  std::string description;
  Kind kind = Kind::elems;
  Engine engine = Engine::SP;
  std::string text;  // assembly without the .target line
  uint64_t instructions = 0;
  double work = 0;     // FLOPs, elements per partition, or bytes per core
  uint32_t cores = 1;  // cores that run the program (HBM: every core of chip 0)
  double peak = 0;     // in the printed unit
};

std::string_view short_dtype(isa::DType t) {
  switch (t) {
    case isa::DType::fp32:
      return "fp32";
    case isa::DType::bf16:
      return "bf16";
    case isa::DType::fp8_e4m3:
      return "fp8e4";
    case isa::DType::int32:
      return "i32";
    default:
      return isa::dtype_name(t);
  }
}

// [128, N] SBUF tile of `t` at byte `offset`.
std::string tile(isa::DType t, uint64_t offset, uint32_t n, std::string_view space = "sbuf") {
  return fmt::format("{}.{}[0:128]+{}[[1,{}]]", space, short_dtype(t), offset, n);
}

// ---- TensorE: [K=128, M=128] stationary x [128, N] moving, one stationary for the whole stream
// ----
Spec pe_matmul(const spec::GenerationConfig& g, isa::DType dt, uint32_t n) {
  Spec s;
  const std::string d(short_dtype(dt));
  s.name = fmt::format("pe_matmul_{}_128x128x{}", d, n);
  s.group = "TensorE";
  s.description = fmt::format("{} matmuls [128x128]x[128x{}] {}, same weights", kStream, n, d);
  s.kind = Kind::flops;
  s.engine = Engine::PE;
  for (int i = 0; i < kStream; ++i)
    s.text += fmt::format("pe matmul dst=psum.fp32[0:128]+{}[[1,{}]] stationary={} moving={}\n",
                          (i % 8) * 2048, n, tile(dt, 0, 128), tile(dt, 1024, n));
  s.instructions = kStream;
  s.work = double(kStream) * 2.0 * 128 * 128 * n;
  s.peak = g.peak_bf16_flops() / 1e12;
  return s;
}

// ---- TensorE in FP8 double performance mode (v3+): stationary [128, 2, 128] x moving
// [128, 2, N], a contraction of 256, two rows a cycle ----
Spec pe_matmul_double_row(const spec::GenerationConfig& g, uint32_t n) {
  Spec s;
  s.name = fmt::format("pe_matmul_fp8e4_double_row_256x128x{}", n);
  s.group = "TensorE";
  s.description = fmt::format(
      "{} matmuls [256x128]x[256x{}] fp8e4 in double_row mode, same weights", kStream, n);
  s.kind = Kind::flops;
  s.engine = Engine::PE;
  for (int i = 0; i < kStream; ++i)
    s.text += fmt::format(
        "pe matmul dst=psum.fp32[0:128]+{}[[1,{}]] stationary={} moving={} double_row=true\n",
        (i % 8) * 2048, n, tile(isa::DType::fp8_e4m3, 0, 256),
        tile(isa::DType::fp8_e4m3, 1024, 2 * n));
  s.instructions = kStream;
  s.work = double(kStream) * 2.0 * 256 * 128 * n;
  s.peak = g.peak_bf16_flops() / 1e12;
  return s;
}

// ---- ScalarE activation over [128, N] ----
Spec act_activation(isa::DType dt, uint32_t n, bool dependent) {
  Spec s;
  const std::string d(short_dtype(dt));
  s.name = fmt::format("act_activation_exp_{}_n{}{}", d, n, dependent ? "_dependent" : "");
  s.group = "ScalarE";
  s.description =
      dependent ? fmt::format("{} exp [128,{}] {}, each reads the previous result", kStream, n, d)
                : fmt::format("{} exp [128,{}] {}, independent", kStream, n, d);
  s.engine = Engine::ACT;
  const uint64_t bytes = uint64_t{n} * isa::dtype_size(dt);
  for (int i = 0; i < kStream; ++i) {
    const uint64_t src = dependent && i % 2 ? bytes : 0, dst = dependent && i % 2 ? 0 : bytes;
    s.text +=
        fmt::format("act activation dst={} src={} func=exp\n", tile(dt, dst, n), tile(dt, src, n));
  }
  s.instructions = kStream;
  s.work = double(kStream) * n;
  s.peak = 1.0;
  return s;
}

// ---- VectorE tensor_tensor add over [128, N]: both inputs in SBUF, or in1 in PSUM ----
Spec dve_tensor_tensor(isa::DType dt, uint32_t n, bool psum_input) {
  Spec s;
  const std::string d(short_dtype(dt));
  s.name = fmt::format("dve_tensor_tensor_add_{}_n{}{}", d, n, psum_input ? "_psum" : "");
  s.group = "VectorE";
  s.description = fmt::format("{} add [128,{}] {}, {}", kStream, n, d,
                              psum_input ? "in1 in PSUM" : "all in SBUF");
  s.engine = Engine::DVE;
  const uint64_t bytes = uint64_t{n} * isa::dtype_size(dt);
  const std::string in1 = psum_input ? tile(dt, 0, n, "psum") : tile(dt, bytes, n);
  for (int i = 0; i < kStream; ++i)
    s.text += fmt::format("dve tensor_tensor dst={} in0={} in1={} op=add\n", tile(dt, 2 * bytes, n),
                          tile(dt, 0, n), in1);
  s.instructions = kStream;
  s.work = double(kStream) * n;
  s.peak = 1.0;
  return s;
}

// ---- VectorE tensor_scalar (multiply, add) over [128, N] ----
Spec dve_tensor_scalar(isa::DType dt, uint32_t n) {
  Spec s;
  const std::string d(short_dtype(dt));
  s.name = fmt::format("dve_tensor_scalar_{}_n{}", d, n);
  s.group = "VectorE";
  s.description = fmt::format("{} x*2+1 [128,{}] {}, SBUF to SBUF", kStream, n, d);
  s.engine = Engine::DVE;
  const uint64_t bytes = uint64_t{n} * isa::dtype_size(dt);
  for (int i = 0; i < kStream; ++i)
    s.text += fmt::format("dve tensor_scalar dst={} src={} op0=multiply imm0=2 op1=add imm1=1\n",
                          tile(dt, bytes, n), tile(dt, 0, n));
  s.instructions = kStream;
  s.work = double(kStream) * n;
  s.peak = 1.0;
  return s;
}

// ---- GpSimdE iota into [128, N] int32 ----
Spec pool_iota(uint32_t n) {
  Spec s;
  s.name = fmt::format("pool_iota_i32_n{}", n);
  s.group = "GpSimdE";
  s.description = fmt::format("{} iota [128,{}] int32", kStream, n);
  s.engine = Engine::POOL;
  for (int i = 0; i < kStream; ++i)
    s.text += fmt::format("pool iota dst={} pattern=pattern[[1,{}]] channel_multiplier={}\n",
                          tile(isa::DType::int32, 0, n), n, n);
  s.instructions = kStream;
  s.work = double(kStream) * n;
  s.peak = 1.0;
  return s;
}

std::string size_text(uint64_t bytes) {
  if (bytes % (1024 * 1024) == 0) return fmt::format("{}MiB", bytes / (1024 * 1024));
  if (bytes % 1024 == 0) return fmt::format("{}KiB", bytes / 1024);
  return fmt::format("{}B", bytes);
}

// ---- DMA: kDmaCopies HBM->SBUF copies of [rows, F] fp32, triggered by SP ----
// 8 rows use one DMA engine (one per 8 partitions); 128 rows use all 16.
Spec dma_load(const spec::GenerationConfig& g, uint32_t rows, uint32_t cols, uint32_t cores,
              int copies) {
  Spec s;
  const uint64_t bytes = uint64_t{rows} * cols * 4;
  const uint32_t engines = std::min<uint32_t>(
      g.dma_engines, (rows + g.partitions / g.dma_engines - 1) / (g.partitions / g.dma_engines));
  if (cores == 1) {
    s.name = engines == 1 ? fmt::format("dma_1engine_load_{}", size_text(bytes))
                          : fmt::format("dma_{}engines_load_{}", engines, size_text(bytes));
    s.group = "DMA";
    s.description = fmt::format("{} HBM->SBUF copies [{},{}] fp32 on {} DMA engine{}", copies, rows,
                                cols, engines, engines == 1 ? "" : "s");
    s.peak = engines * g.dma_engine_bytes_per_ns;
  } else {
    s.name = fmt::format("hbm_{}cores_load_{}", cores, size_text(bytes));
    s.group = "HBM";
    s.description = fmt::format("{} cores x {} copies [{},{}] fp32 HBM->SBUF, 16 DMA engines each",
                                cores, copies, rows, cols);
    s.peak = g.hbm_bytes_per_ns;
  }
  s.kind = Kind::bytes;
  s.engine = Engine::SP;
  s.text = fmt::format(".tensor x fp32 [{},{}] input\n", rows, cols);
  for (int i = 0; i < copies; ++i)
    s.text += fmt::format(
        "sp dma_copy dst=sbuf.fp32[0:{0}]+0[[1,{1}]] src=hbm.fp32(x)+0[[{1},{0}],[1,{1}]] "
        "queue={2}\n",
        rows, cols, i % 16);
  s.instructions = static_cast<uint64_t>(copies);
  s.work = double(bytes) * copies * cores;
  s.cores = cores;
  return s;
}

std::vector<Spec> specs(const Platform& p) {
  const spec::GenerationConfig& g = p.generation;
  using isa::DType;
  std::vector<Spec> out;
  for (uint32_t n : {512u, 128u, 32u}) out.push_back(pe_matmul(g, DType::bf16, n));
  out.push_back(pe_matmul(g, DType::fp32, 512));
  out.push_back(pe_matmul(g, DType::fp8_e4m3, 512));
  if (g.target && g.target->core_version >= 3) out.push_back(pe_matmul_double_row(g, 512));
  for (DType dt : {DType::fp32, DType::bf16})
    for (uint32_t n : {16u, 128u, 512u, 2048u}) out.push_back(act_activation(dt, n, false));
  out.push_back(act_activation(DType::fp32, 512, true));
  for (DType dt : {DType::fp32, DType::bf16})
    for (uint32_t n : {16u, 128u, 512u, 2048u}) out.push_back(dve_tensor_tensor(dt, n, false));
  out.push_back(dve_tensor_tensor(DType::fp32, 512, true));
  for (DType dt : {DType::fp32, DType::bf16})
    for (uint32_t n : {16u, 128u, 512u, 2048u}) out.push_back(dve_tensor_scalar(dt, n));
  for (uint32_t n : {16u, 512u, 2048u}) out.push_back(pool_iota(n));
  // One DMA engine: 2 KiB, 32 KiB, 256 KiB per transfer.
  for (uint32_t cols : {64u, 1024u, 8192u})
    out.push_back(dma_load(g, g.partitions / g.dma_engines, cols, 1, kDmaCopies));
  // All DMA engines of one core: the same per engine.
  for (uint32_t cols : {64u, 1024u, 8192u})
    out.push_back(dma_load(g, g.partitions, cols, 1, kDmaCopies));
  // Every core of chip 0 at once: HBM bandwidth shared.
  out.push_back(dma_load(g, g.partitions, 8192, p.instance.cores_per_chip, 16));
  return out;
}

MicroResult run_one(const Platform& p, const Spec& spec) {
  const spec::GenerationConfig& g = p.generation;
  const isa::Program program =
      isa::assemble(fmt::format(".target {}\n{}", g.name, spec.text), spec.name + ".s");
  sim::DeviceOptions options;
  options.mode = sim::Mode::timing_only;
  options.launch = false;  // the engines alone
  sim::Device device(p.instance, g, options);
  std::vector<sim::Execution> executions;
  for (uint32_t c = 0; c < spec.cores; ++c) {
    const sim::ProgramRef loaded = device.load(c, program, spec.name);
    executions.push_back({loaded, device.allocate_io(*loaded), spec.name});
  }
  // Every core in one window, so that they share HBM.
  const auto seqs = device.enqueue_group(std::move(executions), {});
  const sim::Completion done = device.wait(seqs.front());
  if (done.error) std::rethrow_exception(done.error);
  const sim::RunResult r = *done.run;

  MicroResult out;
  out.name = fmt::format("{}/{}", g.name, spec.name);
  out.group = spec.group;
  out.description = spec.description;
  out.total_ps = r.total_ps;
  out.instructions = spec.instructions;
  out.peak = spec.peak;
  const double ps = static_cast<double>(r.total_ps);
  switch (spec.kind) {
    case Kind::flops:  // FLOP per ps = TFLOP/s
      out.unit = "TFLOP/s";
      out.metric_unit = "tflops";
      out.achieved = spec.work / ps;
      break;
    case Kind::elems:
      out.unit = "elem/cycle";
      out.metric_unit = "elems_per_cycle";
      break;
    case Kind::bytes:  // bytes per ns
      out.unit = "B/ns";
      out.metric_unit = "bytes_per_ns";
      out.achieved = spec.work * 1000.0 / ps;
      break;
  }
  if (spec.kind != Kind::bytes) {
    const double cycles = ps * g.ghz(spec.engine) / 1000.0;
    out.cycles_per_instruction = cycles / static_cast<double>(spec.instructions);
    if (spec.kind == Kind::elems) out.achieved = spec.work / cycles;
  }
  return out;
}

std::string fixed(double v, int digits) {
  return fmt::format("{:.{}f}", v, digits);
}

int digits_for(const std::string& unit) {
  return unit == "B/ns" ? 1 : unit == "TFLOP/s" ? 2 : 3;
}

}  // namespace

std::vector<MicroResult> run_micro(const Platform& platform, const Selection& selection) {
  std::vector<MicroResult> out;
  for (const Spec& s : specs(platform))
    if (selection.selected(fmt::format("{}/{}", platform.generation.name, s.name)))
      out.push_back(run_one(platform, s));
  return out;
}

void append_measurements(const MicroResult& r, std::vector<Measurement>& out) {
  out.push_back({r.name, "achieved_" + r.metric_unit, r.achieved});
  out.push_back({r.name, "peak_" + r.metric_unit, r.peak});
  out.push_back({r.name, "fraction_of_peak", r.achieved / r.peak});
  out.push_back({r.name, "total_ns", static_cast<double>(r.total_ps) / 1000.0});
  if (r.cycles_per_instruction > 0)
    out.push_back({r.name, "cycles_per_instruction", r.cycles_per_instruction});
}

std::string micro_table(const std::vector<MicroResult>& results, const Platform& p) {
  if (results.empty()) return "";
  size_t w = 9;
  for (const MicroResult& r : results) w = std::max(w, r.name.size());
  std::string out = fmt::format(
      "Microbenchmarks on {} ({}), timing_only; cycles per instruction at the engine's clock\n",
      p.instance.name, p.generation.name);
  out += fmt::format("{:<{}}  {:>10}  {:>10}  {:<10}  {:>7}  {:>9}  {:>12}  {}\n", "benchmark", w,
                     "achieved", "peak", "unit", "% peak", "cyc/inst", "total ns", "what");
  std::string group;
  for (const MicroResult& r : results) {
    if (r.group != group) {
      out += fmt::format("-- {}\n", r.group);
      group = r.group;
    }
    out += fmt::format("{:<{}}  {:>10}  {:>10}  {:<10}  {:>7}  {:>9}  {:>12}  {}\n", r.name, w,
                       fixed(r.achieved, digits_for(r.unit)), fixed(r.peak, digits_for(r.unit)),
                       r.unit, fixed(100.0 * r.achieved / r.peak, 1),
                       r.cycles_per_instruction > 0 ? fixed(r.cycles_per_instruction, 1) : "-",
                       fixed(static_cast<double>(r.total_ps) / 1000.0, 1), r.description);
  }
  return out;
}

}  // namespace neuronsim::bench
