// The benchmarks of `neuron-sim bench` (bench/README.md describes each one):
// microbenchmarks of the engines, DMA and HBM against their theoretical rates
// (timing_only), the example kernels' simulated results (functional_and_timing),
// and the simulator's host speed (--speed; machine dependent, never gated).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "expected.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/sim/types.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::bench {

struct Platform {
  spec::InstanceConfig instance;
  spec::GenerationConfig generation;
};

// Which benchmarks run: those whose full name contains `filter` (empty: all).
struct Selection {
  std::string filter;
  bool selected(const std::string& name) const {
    return filter.empty() || name.find(filter) != std::string::npos;
  }
};

inline sim::RunOptions run_options(sim::Mode mode) {
  sim::RunOptions o;
  o.mode = mode;
  return o;
}

// ---- microbenchmarks ----

struct MicroResult {
  std::string name;   // "trn2/pe_matmul_bf16_128x128x512"
  std::string group;  // "TensorE", "ScalarE", "VectorE", "GpSimdE", "DMA", "HBM"
  std::string description;
  std::string unit;         // as printed: "TFLOP/s", "elem/cycle", "B/ns"
  std::string metric_unit;  // in metric names: "tflops", "elems_per_cycle", "bytes_per_ns"
  double achieved = 0;
  double peak = 0;
  uint64_t total_ps = 0;
  double cycles_per_instruction = 0;  // engine benchmarks (engine clock); 0 for DMA/HBM
  uint64_t instructions = 0;
};

std::vector<MicroResult> run_micro(const Platform& platform, const Selection& selection);
void append_measurements(const MicroResult& r, std::vector<Measurement>& out);
std::string micro_table(const std::vector<MicroResult>& results, const Platform& platform);

// ---- example kernels ----

struct KernelSpec {
  std::string name;  // without the generation prefix: "matmul_bf16_512x512x1024"
  std::string description;
  std::function<isa::Program(const std::string& target)> build;
  bool is_matmul = false;
};
std::vector<KernelSpec> kernel_specs();

struct KernelResult {
  std::string name;  // "trn2/matmul_bf16_512x512x1024"
  std::string description;
  uint64_t instructions = 0;
  uint64_t total_ps = 0;
  double total_act_cycles = 0;
  std::array<uint64_t, 5> engine_busy_ps{};  // PE, ACT, DVE, POOL, SP
  uint64_t dma_bytes = 0, dma_transfers = 0, hbm_read_bytes = 0, hbm_write_bytes = 0;
  uint64_t matmul_flops = 0;
  double mfu_percent = 0;
  bool is_matmul = false;
};

// Deterministic pseudo-random inputs (splitmix64): the same sequence on every
// machine and standard library, unlike the <random> distributions.
class InputFiller {
 public:
  explicit InputFiller(uint64_t seed) : state_(seed) {}
  float next();  // uniform in [-1, 1), 24-bit resolution
 private:
  uint64_t state_;
};

// The median of `n` timings of `fn`, in microseconds.
template <typename Fn>
double median_us(int n, Fn&& fn) {
  for (int i = 0; i < n / 5; ++i) fn();  // warm-up: caches, allocator, first-call set-up
  std::vector<double> us(static_cast<size_t>(n));
  for (double& t : us) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  std::nth_element(us.begin(), us.begin() + n / 2, us.end());
  return us[static_cast<size_t>(n / 2)];
}

// Host µs per nrt_execute and nrta_execute_schedule through libnrt.so.1 (speed_nrt.cpp).
std::string nrt_speed(const Platform& platform);

// Writes InputFiller(seed) values into every input of a loaded program.
void fill_inputs(sim::Device& device, const sim::LoadedProgram& program, const sim::Bindings& io,
                 uint64_t seed);

std::vector<KernelResult> run_kernels(const Platform& platform, const Selection& selection);
void append_measurements(const KernelResult& r, std::vector<Measurement>& out);
std::string kernel_table(const std::vector<KernelResult>& results, const Platform& platform);

// ---- host speed (--speed) ----

// Runs the speed measurements and returns the printed report.
std::string run_speed(const Platform& platform, double min_seconds);

}  // namespace neuronsim::bench
