// Helpers of the functional-plane tests. They reach memory directly (OnChipMemory::at,
// SparseMemory::read/write and the isa conversions) with their own walk of an access
// pattern, so expected values never come from the code under test.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/functional.h"

namespace neuronsim::sim::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One trn2 core with 4 GiB of HBM.
struct Core {
  SparseMemory hbm{uint64_t{4} << 30};
  CoreState st{isa::target_by_name("trn2"), hbm};
};

// Assembles `decls` (tensor declarations) followed by one instruction line and returns that
// instruction (validated by the assembler) together with its program.
inline std::pair<isa::Program, isa::Instruction> parse_with(const std::string& line,
                                                            const std::string& decls) {
  isa::Program p = isa::assemble(".target trn2\n" + decls + "\n" + line + "\n");
  for (const auto& s : p.streams)
    if (!s.empty()) return {p, s.front()};
  throw std::runtime_error("no instruction in: " + line);
}

inline isa::Instruction parse(const std::string& line) {
  return parse_with(line, "").second;
}

inline const isa::AccessPattern& operand(const isa::Instruction& in, isa::Role r) {
  const isa::AccessPattern* ap = in.operand(r);
  if (!ap) throw std::runtime_error("operand missing in test instruction");
  return *ap;
}

// (partition or row, byte offset) of every element, in walk order: rows, then dims outermost first.
inline std::vector<std::pair<uint32_t, int64_t>> element_places(const isa::AccessPattern& ap) {
  std::vector<std::pair<uint32_t, int64_t>> out;
  const int64_t es = static_cast<int64_t>(isa::dtype_size(ap.dtype));
  uint32_t size[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};
  for (int k = 0; k < ap.num_dims; ++k) {
    size[4 - ap.num_dims + k] = ap.dims[k].size;
    stride[4 - ap.num_dims + k] = ap.dims[k].stride;
  }
  for (uint32_t p = 0; p < ap.num_partitions; ++p)
    for (uint32_t a = 0; a < size[0]; ++a)
      for (uint32_t b = 0; b < size[1]; ++b)
        for (uint32_t c = 0; c < size[2]; ++c)
          for (uint32_t d = 0; d < size[3]; ++d) {
            const int64_t elems = a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
            if (ap.space == isa::MemSpace::HBM)
              out.emplace_back(
                  p, static_cast<int64_t>(ap.offset) + (p * ap.partition_stride + elems) * es);
            else
              out.emplace_back(ap.start_partition + p,
                               static_cast<int64_t>(ap.offset) + elems * es);
          }
  return out;
}

// Raw bytes of element k of `ap`, read or written directly.
inline void put_raw(CoreState& st, const isa::AccessPattern& ap, size_t k, const void* bytes) {
  const auto [p, off] = element_places(ap)[k];
  const size_t es = isa::dtype_size(ap.dtype);
  if (ap.space == isa::MemSpace::HBM)
    st.hbm.write(st.tensors.at(ap.tensor).address + static_cast<uint64_t>(off), bytes, es);
  else
    std::memcpy(
        (ap.space == isa::MemSpace::PSUM ? st.psum : st.sbuf).at(p, static_cast<uint64_t>(off)),
        bytes, es);
}

// Writes `values` (walk order) into `ap`, converted with the isa conversions.
inline void put(CoreState& st, const isa::AccessPattern& ap, const std::vector<float>& values) {
  const auto places = element_places(ap);
  ASSERT_EQ(places.size(), values.size());
  const size_t es = isa::dtype_size(ap.dtype);
  for (size_t k = 0; k < places.size(); ++k) {
    uint8_t b[4];
    isa::store_from_float(ap.dtype, values[k], b, st.fp8);
    const auto [p, off] = places[k];
    if (ap.space == isa::MemSpace::HBM)
      st.hbm.write(st.tensors.at(ap.tensor).address + static_cast<uint64_t>(off), b, es);
    else
      std::memcpy(
          (ap.space == isa::MemSpace::PSUM ? st.psum : st.sbuf).at(p, static_cast<uint64_t>(off)),
          b, es);
  }
}

template <typename T>
void put_bits(CoreState& st, const isa::AccessPattern& ap, const std::vector<T>& values) {
  ASSERT_EQ(isa::dtype_size(ap.dtype), sizeof(T));
  ASSERT_EQ(element_places(ap).size(), values.size());
  for (size_t k = 0; k < values.size(); ++k) put_raw(st, ap, k, &values[k]);
}

template <typename T>
std::vector<T> get_bits(CoreState& st, const isa::AccessPattern& ap) {
  std::vector<T> out;
  for (const auto& [p, off] : element_places(ap)) {
    T v;
    if (ap.space == isa::MemSpace::HBM)
      st.hbm.read(st.tensors.at(ap.tensor).address + static_cast<uint64_t>(off), &v, sizeof v);
    else
      std::memcpy(
          &v,
          (ap.space == isa::MemSpace::PSUM ? st.psum : st.sbuf).at(p, static_cast<uint64_t>(off)),
          sizeof v);
    out.push_back(v);
  }
  return out;
}

// The values of `ap` (walk order) as FP32.
inline std::vector<float> get(CoreState& st, const isa::AccessPattern& ap) {
  std::vector<float> out;
  for (const auto& [p, off] : element_places(ap)) {
    uint8_t b[4];
    const size_t es = isa::dtype_size(ap.dtype);
    if (ap.space == isa::MemSpace::HBM)
      st.hbm.read(st.tensors.at(ap.tensor).address + static_cast<uint64_t>(off), b, es);
    else
      std::memcpy(
          b,
          (ap.space == isa::MemSpace::PSUM ? st.psum : st.sbuf).at(p, static_cast<uint64_t>(off)),
          es);
    out.push_back(isa::load_as_float(ap.dtype, b, st.fp8));
  }
  return out;
}

inline std::vector<float> random_values(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<float> iota_values(size_t n, float start = 0.0f, float step = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// Runs `line` on `core` and returns the ExecError it throws (fails the test if none).
inline ExecError exec_error(Core& core, const isa::Instruction& in) {
  try {
    execute(in, core.st);
  } catch (const ExecError& e) {
    return e;
  }
  ADD_FAILURE() << "no ExecError from " << isa::format_instruction(in);
  return ExecError(ExecError::Kind::unsupported, "");
}

}  // namespace neuronsim::sim::test
