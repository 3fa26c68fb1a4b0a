// The per-generation limits the instruction set is validated against. The
// simulator's full chip description lives in the generation files (spec/configs),
// which repeat these figures and are checked against them when they load; these
// are only the figures that decide whether an instruction is legal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuronsim::isa {

struct Target {
  std::string_view name;         // trn1, trn2, trn3
  std::string_view neff_target;  // kelf-0.json "target" we write
  int core_version;              // NeuronCore-v2, v3, v4
  uint32_t num_partitions;       // SBUF and PSUM partitions
  uint32_t sbuf_partition_bytes;
  uint32_t psum_partition_bytes;
  uint32_t psum_bank_bytes;
  uint32_t pe_stationary_fmax;  // stationary free size (output partitions)
  uint32_t pe_moving_fmax;      // moving free size (elements)
  uint32_t sbuf_free_max;       // ACT/DVE free elements per partition from SBUF
  uint32_t psum_free_max;       // ACT/DVE free elements per partition from PSUM
  uint32_t bn_stats_fmax;

  bool operator==(const Target&) const = default;
};

// Built in: trn1 (NeuronCore-v2; also inf2), trn2 (v3), trn3 (v4); figures and sources in
// docs/isa.md. Any other generation adds its own target when its spec file loads (add_target).
const Target& target_by_name(std::string_view name);  // throws IsaError for unknown names
std::optional<std::string_view> find_target_name(std::string_view name_or_neff_target);

// Adds a target the built-in table does not have (a generation described only by its spec
// file). The strings are copied and the target lives until the process ends. Adding a target
// again with the same figures returns the one already added; an IsaError when its name is
// already a target (or the NEFF target of one) with other figures, or its NEFF target is
// another target's.
const Target& add_target(const Target& target);

// Every target name, the built-in ones first, then the added ones, then aliases (inf2); for
// messages that list the known targets.
std::vector<std::string> target_names();

}  // namespace neuronsim::isa
