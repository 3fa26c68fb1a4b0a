#include "neuronsim/isa/target.h"

#include <array>
#include <deque>
#include <mutex>

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

// Other names of a target: inf2 carries the same NeuronCore-v2 as trn1 (§1).
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kAliases = {
    {{"inf2", "trn1"}}};

// Targets added at run time (add_target). A deque keeps every element (and the strings its
// string_views point into) in place as it grows.
struct Added {
  std::string name, neff_target;
  Target target;
};

struct Registry {
  std::mutex mu;
  std::deque<Added> added;
};

Registry& registry() {
  static Registry r;
  return r;
}

// A built-in target named `name` (or whose NEFF target is `name`, or an alias); null if none.
const Target* find_builtin(std::string_view& name) {
  for (const auto& [alias, target] : kAliases)
    if (alias == name) name = target;
  for (const Target& t : kTargets)
    if (t.name == name || t.neff_target == name) return &t;
  return nullptr;
}

// The target named `name`, built in or added; null if none. Callers hold the registry lock
// (the built-in table needs none: find() looks there first).
const Target* find_locked(std::string_view name) {
  if (const Target* t = find_builtin(name)) return t;
  for (const Added& a : registry().added)
    if (a.target.name == name || a.target.neff_target == name) return &a.target;
  return nullptr;
}

const Target* find(std::string_view name) {
  if (const Target* t = find_builtin(name)) return t;
  std::lock_guard<std::mutex> lock(registry().mu);
  return find_locked(name);
}

std::string joined_names() {
  std::string out;
  for (const std::string& n : target_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::optional<std::string_view> find_target_name(std::string_view name) {
  if (const Target* t = find(name)) return t->name;
  return std::nullopt;
}

const Target& target_by_name(std::string_view name) {
  if (const Target* t = find(name)) return *t;
  throw IsaError(fmt::format("unknown target '{}' (known: {})", name, joined_names()));
}

const Target& add_target(const Target& target) {
  if (target.name.empty() || target.neff_target.empty())
    throw IsaError("a target needs a name and a NEFF target");
  std::lock_guard<std::mutex> lock(registry().mu);
  if (const Target* known = find_locked(target.name)) {
    Target same = target;
    same.name = known->name;
    same.neff_target = known->neff_target;
    if (known->name == target.name && known->neff_target == target.neff_target && same == *known)
      return *known;
    throw IsaError(
        fmt::format("target '{}' is already known with other figures (as '{}', NEFF target '{}')",
                    target.name, known->name, known->neff_target));
  }
  if (const Target* other = find_locked(target.neff_target))
    throw IsaError(fmt::format("target '{}': NEFF target '{}' already names target '{}'",
                               target.name, target.neff_target, other->name));
  Added& a = registry().added.emplace_back(
      Added{std::string(target.name), std::string(target.neff_target), target});
  a.target.name = a.name;
  a.target.neff_target = a.neff_target;
  return a.target;
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const Target& t : kTargets) names.emplace_back(t.name);
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (const Added& a : registry().added) names.push_back(a.name);
  }
  for (const auto& [alias, unused] : kAliases) names.emplace_back(alias);
  return names;
}

}  // namespace neuronsim::isa
