#include "neuronsim/sim/types.h"

#include <algorithm>
#include <cctype>

namespace neuronsim::sim {

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::functional_and_timing:
      return "functional-and-timing";
    case Mode::functional_only:
      return "functional-only";
    case Mode::timing_only:
      return "timing-only";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view name) {
  std::string lower(name);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "default") return Mode::functional_and_timing;
  for (Mode m : {Mode::functional_and_timing, Mode::functional_only, Mode::timing_only})
    if (lower == mode_name(m)) return m;
  return std::nullopt;
}

}  // namespace neuronsim::sim
