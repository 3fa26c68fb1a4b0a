#include "common.h"

#include <stdexcept>

#include <fmt/format.h>

#include "neuronsim/isa/error.h"

namespace neuronsim::kernels::detail {

void fail(std::string_view kernel, const std::string& message) {
  throw std::invalid_argument(fmt::format("{}: {}", kernel, message));
}

void check_dims(std::string_view kernel,
                std::initializer_list<std::pair<const char*, int64_t>> dims) {
  for (const auto& [name, value] : dims) {
    require(value >= 1, kernel, fmt::format("{} must be at least 1, not {}", name, value));
    // A tensor's first dim becomes the row count of one HBM access pattern (u32).
    require(value <= 0xffffffffLL, kernel,
            fmt::format("{} = {} exceeds the supported 4294967295", name, value));
  }
}

void check_float(std::string_view kernel, const char* what, DType dtype) {
  require(isa::is_float(dtype), kernel,
          fmt::format("{} must be a float dtype, not {}", what, isa::dtype_name(dtype)));
}

AccessPattern hbm_flat(const AccessPattern& t, uint64_t start, uint16_t parts, uint32_t per_row) {
  AccessPattern ap = t;
  ap.offset = t.offset + start * isa::dtype_size(t.dtype);
  ap.num_partitions = parts;
  ap.partition_stride = per_row;
  ap.num_dims = 1;
  ap.dims[0] = {1, per_row};
  return ap;
}

AccessPattern hbm_broadcast(const AccessPattern& vec, uint16_t parts, uint32_t n) {
  AccessPattern ap = vec;
  ap.num_partitions = parts;
  ap.partition_stride = 0;
  ap.num_dims = 1;
  ap.dims[0] = {1, n};
  return ap;
}

uint32_t buffer_count(const KernelBuilder& kb, std::string_view kernel, uint64_t fixed_bytes,
                      uint64_t slot_bytes, const std::string& what) {
  const uint64_t capacity = kb.target().sbuf_partition_bytes;
  for (uint32_t n : {3u, 2u})
    if (fixed_bytes + n * slot_bytes <= capacity) return n;
  fail(kernel, fmt::format("{} needs {} bytes per SBUF partition double-buffered, {} has {}", what,
                           fixed_bytes + 2 * slot_bytes, kb.target().name, capacity));
}

AccessPattern sbuf(KernelBuilder& kb, std::string_view kernel, DType dtype, uint32_t parts,
                   uint32_t free) {
  try {
    return kb.sbuf_tile(dtype, u16(parts), free);
  } catch (const isa::IsaError& e) {
    fail(kernel, fmt::format("shape too large for SBUF: {}", e.what()));
  }
}

AccessPattern psum(KernelBuilder& kb, std::string_view kernel, DType dtype, uint32_t parts,
                   uint32_t free) {
  try {
    return kb.psum_tile(dtype, u16(parts), free);
  } catch (const isa::IsaError& e) {
    fail(kernel, fmt::format("out of PSUM: {}", e.what()));
  }
}

void activation_scaled(KernelBuilder& kb, const AccessPattern& dst, const AccessPattern& src,
                       isa::ActFunc func, const AccessPattern& scale, const AccessPattern* bias) {
  isa::Instruction in;
  in.opcode = isa::Opcode::activation;
  in.engine = isa::Engine::ACT;
  in.func = func;
  in.imm0 = 1.0f;  // the assembler's default; unused when the scale operand is present
  in.operands = {{isa::Role::dst, dst}, {isa::Role::src, src}, {isa::Role::scale, scale}};
  if (bias) in.operands.push_back({isa::Role::bias, *bias});
  kb.emit(std::move(in));
}

}  // namespace neuronsim::kernels::detail
