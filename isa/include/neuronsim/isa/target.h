// The per-generation limits the instruction set is validated against. The
// simulator's full chip description lives in sim/configs; these are only the
// figures that decide whether an instruction is legal.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace neuronsim::isa {

struct Target {
  std::string_view name;        // trn1, trn2, trn3
  std::string_view neff_target; // kelf-0.json "target" we write
  int core_version;             // NeuronCore-v2, v3, v4
  uint32_t num_partitions;      // SBUF and PSUM partitions
  uint32_t sbuf_partition_bytes;
  uint32_t psum_partition_bytes;
  uint32_t psum_bank_bytes;
  uint32_t pe_stationary_fmax;  // stationary free size (output partitions)
  uint32_t pe_moving_fmax;      // moving free size (elements)
  uint32_t sbuf_free_max;       // ACT/DVE free elements per partition from SBUF
  uint32_t psum_free_max;       // ACT/DVE free elements per partition from PSUM
  uint32_t bn_stats_fmax;
};

// trn1 (NeuronCore-v2; also inf2), trn2 (v3), trn3 (v4). Figures and sources in docs/isa.md.
const Target& target_by_name(std::string_view name);  // throws IsaError for unknown names
std::optional<std::string_view> find_target_name(std::string_view name_or_neff_target);

}  // namespace neuronsim::isa
