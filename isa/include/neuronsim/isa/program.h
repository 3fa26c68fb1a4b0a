// A Program is one NeuronCore's work in our ISA: the HBM tensors it names and
// the five engine streams. It is what the assembler parses, the KernelBuilder
// emits, the simulator runs; to_neff/from_neff convert to and from the container.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "neuronsim/isa/dtype.h"
#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/neff.h"

namespace neuronsim::isa {

enum class TensorKind : uint8_t { input, output, constant, scratch };
std::string_view tensor_kind_name(TensorKind k);

struct TensorDecl {
  std::string name;
  DType dtype = DType::fp32;
  std::vector<int64_t> shape;
  TensorKind kind = TensorKind::input;
  uint16_t var_id = 0;        // the id HBM access patterns use (1-based; 0 is the state buffer)
  std::vector<uint8_t> data;  // constants only: the raw little-endian elements
  uint64_t num_elems() const;
  uint64_t size_bytes() const { return num_elems() * dtype_size(dtype); }
  bool operator==(const TensorDecl&) const = default;
};

struct Program {
  std::string target = "trn2";
  std::vector<TensorDecl> tensors;
  std::array<std::vector<Instruction>, kNumEngines> streams;
  // The physical cores the work is compiled for (a logical NeuronCore, the NEFF's lnc_size: 1
  // or 2). With 2, the compiler splits every op over the pair, which share the HBM stack; the
  // simulator runs the streams on the pair as an even split (docs/cost-model.md §6.2).
  uint32_t lnc = 1;

  const TensorDecl* find_tensor(std::string_view name) const;
  const TensorDecl* find_tensor(uint16_t var_id) const;
  std::vector<Instruction>& stream(Engine e) { return streams[static_cast<size_t>(e)]; }
  const std::vector<Instruction>& stream(Engine e) const { return streams[static_cast<size_t>(e)]; }
  size_t num_instructions() const;
  bool operator==(const Program&) const = default;
};

// Checks every instruction against the target's rules (see validate.h); then builds
// a one-subgraph NEFF laid out like neuronx-cc's, marked as produced by neuronsim.
neff::Neff to_neff(const Program& program, const std::string& name = "file.neff");
// Decodes the streams of one subgraph of a NEFF whose streams use our encoding;
// `source` names the NEFF in errors. Throws NeffError when the streams are not
// ours (a real neuronx-cc NEFF) and IsaError when they do not decode.
Program from_neff(const neff::Neff& neff, const std::string& source, size_t subgraph = 0);

}  // namespace neuronsim::isa
