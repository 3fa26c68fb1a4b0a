// Shared helpers of the kernel tests: deterministic inputs rounded to the
// kernel's dtype, and a functional run of a kernel Program on HBM tensors given
// and returned by name as FP32 values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/sim/functional.h"

namespace neuronsim::kernels::test {

using isa::DType;

// The unit roundoff of FP32, in which every engine computes.
inline constexpr double kU32 = 0x1p-24;

// Unit roundoff of one write to `dtype` (round to nearest even, p significand
// bits including the implicit one: 2^-p).
inline double rounding(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return kU32;
    case DType::bf16:
      return 0x1p-8;
    case DType::fp16:
      return 0x1p-11;
    default:
      return 0.0;
  }
}

inline std::vector<uint8_t> encode(DType dtype, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * isa::dtype_size(dtype));
  isa::convert_from_float(dtype, v.data(), out.data(), v.size());
  return out;
}

inline std::vector<float> decode(DType dtype, const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / isa::dtype_size(dtype));
  isa::convert_to_float(dtype, bytes.data(), out.data(), out.size());
  return out;
}

// The value `v` becomes when stored as `dtype`.
inline float round_to(DType dtype, float v) {
  uint8_t buf[8];
  isa::store_from_float(dtype, v, buf);
  return isa::load_as_float(dtype, buf);
}

// `n` values uniform in [lo, hi), from a fixed-seed generator, already rounded to
// `dtype` so that references see exactly what the kernel reads.
inline std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi, DType dtype) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = round_to(dtype, dist(gen));
  return v;
}

// Raw bytes in, raw bytes out: loads the program on a fresh device, writes `inputs`,
// runs it functionally and returns every output tensor.
inline std::map<std::string, std::vector<uint8_t>> run_raw(
    const isa::Program& program, const std::map<std::string, std::vector<uint8_t>>& inputs) {
  sim::DeviceOptions options;
  options.mode = sim::Mode::functional_only;
  auto device = sim::Device::open_generation(program.target, options);
  const sim::ProgramRef loaded = device->load(0, program, "kernel");
  const sim::Bindings io = device->allocate_io(*loaded);
  for (const auto& [name, bytes] : inputs) {
    const isa::TensorDecl* t = program.find_tensor(name);
    EXPECT_NE(t, nullptr) << "no tensor " << name;
    if (!t) continue;
    EXPECT_EQ(bytes.size(), t->size_bytes()) << name;
    device->write_tensor(*loaded, io, name, bytes);
  }
  device->run({loaded, io, "kernel"});
  std::map<std::string, std::vector<uint8_t>> outputs;
  for (const isa::TensorDecl& t : program.tensors)
    if (t.kind == isa::TensorKind::output)
      outputs[t.name] = device->read_tensor(*loaded, io, t.name);
  return outputs;
}

// The same with FP32 values, converted to and from each tensor's dtype.
inline std::map<std::string, std::vector<float>> run(
    const isa::Program& program, const std::map<std::string, std::vector<float>>& inputs) {
  std::map<std::string, std::vector<uint8_t>> raw;
  for (const auto& [name, values] : inputs) {
    const isa::TensorDecl* t = program.find_tensor(name);
    if (t) raw[name] = encode(t->dtype, values);
  }
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, bytes] : run_raw(program, raw))
    out[name] = decode(program.find_tensor(name)->dtype, bytes);
  return out;
}

// Compares `got` with `want` elementwise under a per-element absolute tolerance;
// reports the first few mismatches with their [row, col].
template <class Tol>
void expect_close(const std::vector<float>& got, const std::vector<double>& want, size_t cols,
                  Tol&& tol) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double t = tol(i);
    if (std::fabs(double{got[i]} - want[i]) <= t) continue;  // also fails on NaN
    ++bad;
    if (reported++ < 5)
      ADD_FAILURE() << "[" << i / cols << ", " << i % cols << "]: got " << got[i] << ", want "
                    << want[i] << " (tolerance " << t << ")";
  }
  EXPECT_EQ(bad, 0u) << "elements out of tolerance, of " << got.size();
}

inline size_t count_opcode(const isa::Program& p, isa::Opcode op) {
  size_t n = 0;
  for (const auto& stream : p.streams)
    for (const isa::Instruction& in : stream) n += in.opcode == op;
  return n;
}

// `op` instructions in the stream of `engine`.
inline size_t count_opcode(const isa::Program& p, isa::Engine engine, isa::Opcode op) {
  size_t n = 0;
  for (const isa::Instruction& in : p.stream(engine)) n += in.opcode == op;
  return n;
}

// What a program's DMAs read of tensor `name`: elements, and the fewest elements one
// descriptor holds (the innermost dim's size when it is contiguous, else 1).
struct HbmReads {
  uint64_t elems = 0;
  uint32_t shortest_run = UINT32_MAX;
};
inline HbmReads hbm_reads(const isa::Program& p, const char* name) {
  const uint16_t id = p.find_tensor(name)->var_id;
  HbmReads r;
  for (const auto& stream : p.streams)
    for (const isa::Instruction& in : stream) {
      if (in.opcode != isa::Opcode::dma_copy) continue;
      const isa::AccessPattern& src = *in.operand(isa::Role::src);
      if (src.space != isa::MemSpace::HBM || src.tensor != id) continue;
      r.elems += src.total_elems();
      const isa::Dim inner = src.dims[src.num_dims - 1];
      r.shortest_run = std::min(r.shortest_run, inner.stride == 1 ? inner.size : 1u);
    }
  return r;
}

// dma_copy instructions triggered by `engine`.
inline size_t count_dma(const isa::Program& p, isa::Engine engine) {
  return count_opcode(p, engine, isa::Opcode::dma_copy);
}

}  // namespace neuronsim::kernels::test
