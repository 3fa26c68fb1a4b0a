#include "neuronsim/isa/target.h"

#include <array>

#include <fmt/format.h>

#include "neuronsim/isa/error.h"

namespace neuronsim::isa {
namespace {

constexpr uint32_t KiB = 1024;

// Sources (shared research notes, neuron-hardware.md): SBUF and PSUM sizes §2.2
// [N1, N2, N3]; matmul operand limits and PSUM bank size §4.3 (gemm_stationary_fmax,
// gemm_moving_fmax, psum_bank_fmax) and §4.2 (v4 moving free size up to 4096);
// ACT/DVE free-size limits (64K from SBUF, 4K from PSUM) and bn_stats_fmax §2.2, §4.3.
// "cayman" is the kelf target of the public Trn2 NEFFs (§6.2); other generations'
// codenames are not public, so we write the generation name.
constexpr std::array<Target, 3> kTargets = {{
    {"trn1", "trn1", 2, 128, 192 * KiB, 16 * KiB, 2 * KiB, 128, 512, 65536, 4096, 512},
    {"trn2", "cayman", 3, 128, 224 * KiB, 16 * KiB, 2 * KiB, 128, 512, 65536, 4096, 512},
    {"trn3", "trn3", 4, 128, 256 * KiB, 16 * KiB, 2 * KiB, 128, 4096, 65536, 4096, 512},
}};

}  // namespace

std::optional<std::string_view> find_target_name(std::string_view name) {
  if (name == "inf2") return "trn1";  // same NeuronCore-v2 (§1)
  for (const Target& t : kTargets)
    if (t.name == name || t.neff_target == name) return t.name;
  return std::nullopt;
}

const Target& target_by_name(std::string_view name) {
  if (auto found = find_target_name(name))
    for (const Target& t : kTargets)
      if (t.name == *found) return t;
  throw IsaError(fmt::format("unknown target '{}' (known: trn1, trn2, trn3, inf2)", name));
}

}  // namespace neuronsim::isa
