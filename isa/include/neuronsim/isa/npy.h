// NumPy .npy arrays (format 1.0-3.0): constants inside NEFFs, and the inputs and
// outputs of `neuron-sim run`. Types NumPy lacks (bfloat16, fp8, tf32) are stored
// as unsigned integers of the same width; the NEFF's tensor map names the real type.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "neuronsim/isa/dtype.h"

namespace neuronsim::isa {

struct NpyArray {
  std::string descr;  // NumPy type string, e.g. "<f4"
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // C order, little-endian
  uint64_t num_elems() const;
};

// Throws NeffError naming `source` on malformed input.
NpyArray parse_npy(std::span<const uint8_t> bytes, const std::string& source);
std::vector<uint8_t> write_npy(const NpyArray& array);

// The .npy type string that stores `t` ("<f4", "<f2", "<u2" for bfloat16, ...).
std::string npy_descr(DType t);
// The dtype a .npy type string holds exactly, if any ("<u2" gives uint16).
std::optional<DType> dtype_from_npy_descr(const std::string& descr);

}  // namespace neuronsim::isa
