// The process's view of the simulated machine, from the Neuron runtime's variables.
#include "neuronsim/sim/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

namespace neuronsim::sim {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// "n", "a-b" or "a,b,c" (contiguous, ascending).
std::optional<std::string> parse_core_list(const std::string& text, std::vector<uint32_t>& out) {
  out.clear();
  const std::string s = trim(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item =
        trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    const size_t dash = item.find('-');
    std::optional<uint64_t> a, b;
    if (dash == std::string::npos) {
      a = b = parse_env_count(item);
      if (!a) return fmt::format("'{}' is not a core index", item);
    } else {
      a = parse_env_count(item.substr(0, dash));
      b = parse_env_count(item.substr(dash + 1));
      if (!a || !b) return fmt::format("'{}' is not a core range", item);
      if (*b < *a) return fmt::format("the range '{}' is descending", item);
    }
    for (uint64_t c = *a; c <= *b; ++c) {
      if (!out.empty() && c != out.back() + 1) return "the cores must be contiguous and ascending";
      out.push_back(static_cast<uint32_t>(c));
      if (out.size() > 100000) return "too many cores";
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) return "no cores listed";
  return std::nullopt;
}

std::optional<std::string> read_visible(Environment& e) {
  const uint32_t total = e.total_logical_cores();
  e.visible.clear();
  if (const char* v = env("NEURON_RT_VISIBLE_CORES")) {
    if (auto err = parse_core_list(v, e.visible))
      return fmt::format("NEURON_RT_VISIBLE_CORES='{}': {}", v, *err);
    if (e.visible.back() >= total)
      return fmt::format(
          "NEURON_RT_VISIBLE_CORES='{}': core {} does not exist; {} has {} logical cores (0-{})", v,
          e.visible.back(), e.instance.name, total, total - 1);
    return std::nullopt;
  }
  uint64_t count = total;
  if (const char* n = env("NEURON_RT_NUM_CORES")) {
    const auto asked = parse_env_count(n);
    if (!asked) return fmt::format("NEURON_RT_NUM_CORES='{}' is not a number", n);
    if (*asked > total)
      return fmt::format(
          "NEURON_RT_NUM_CORES={} asks for more cores than the {} logical cores of {}", *asked,
          total, e.instance.name);
    if (*asked > 0) count = *asked;
  }
  for (uint32_t i = 0; i < count; ++i) e.visible.push_back(i);
  return std::nullopt;
}

std::optional<std::string> read_mode(Environment& e) {
  const char* v = env("NEURONSIM_MODE");
  const std::optional<Mode> mode = parse_mode(v != nullptr ? v : "functional-and-timing");
  if (!mode)
    return fmt::format(
        "NEURONSIM_MODE='{}' is not functional-and-timing, functional-only or timing-only", v);
  e.mode = *mode;
  return std::nullopt;
}

}  // namespace

std::optional<bool> parse_env_bool(const char* value) {
  if (value == nullptr) return false;
  const std::string s = upper(trim(value));
  if (s.empty() || s == "0" || s == "FALSE" || s == "NO" || s == "OFF") return false;
  if (s == "1" || s == "TRUE" || s == "YES" || s == "ON") return true;
  return std::nullopt;
}

std::optional<uint64_t> parse_env_count(const std::string& text) {
  const std::string s = trim(text);
  if (s.empty() || s.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::optional<std::string> read_environment(Environment& e) {
  const char* name = env("NEURONSIM_INSTANCE");
  e.instance_name = name != nullptr ? name : kDefaultInstance;
  try {
    e.instance = spec::load_instance(e.instance_name);
    e.generation = spec::load_generation(e.instance.generation);
  } catch (const std::exception& ex) {
    return fmt::format("NEURONSIM_INSTANCE='{}': {}", e.instance_name, ex.what());
  }

  e.lnc = 1;
  if (const char* v = env("NEURON_RT_VIRTUAL_CORE_SIZE")) {
    const auto lnc = parse_env_count(v);
    if (!lnc || *lnc == 0 || e.instance.cores_per_chip % *lnc != 0)
      return fmt::format(
          "NEURON_RT_VIRTUAL_CORE_SIZE='{}' must be a positive divisor of the {} cores per chip of "
          "{}",
          v, e.instance.cores_per_chip, e.instance.name);
    e.lnc = static_cast<uint32_t>(*lnc);
  }
  // The logical NeuronCore size as TorchNeuron and the compiler's -lnc name it: 1 or 2.
  if (const char* v = env("NEURON_LOGICAL_NC_CONFIG")) {
    const auto lnc = parse_env_count(v);
    if (!lnc || (*lnc != 1 && *lnc != 2) || e.instance.cores_per_chip % *lnc != 0)
      return fmt::format(
          "NEURON_LOGICAL_NC_CONFIG='{}' must be 1 or 2 physical cores per logical core (and "
          "divide the {} cores per chip of {})",
          v, e.instance.cores_per_chip, e.instance.name);
    if (env("NEURON_RT_VIRTUAL_CORE_SIZE") && *lnc != e.lnc)
      return fmt::format(
          "NEURON_LOGICAL_NC_CONFIG='{}' and NEURON_RT_VIRTUAL_CORE_SIZE='{}' disagree; they are "
          "two names of the logical core size",
          v, e.lnc);
    e.lnc = static_cast<uint32_t>(*lnc);
  }
  if (auto err = read_visible(e)) return err;
  if (auto err = read_mode(e)) return err;

  const char* nan = std::getenv("NEURON_FAIL_ON_NAN");
  const auto fail = parse_env_bool(nan);
  if (!fail) return fmt::format("NEURON_FAIL_ON_NAN='{}' is not 0 or 1", nan);
  e.fail_on_nan = *fail;
  if (const char* v = env("NEURON_RT_NUMERICAL_ERRORS_VERBOSITY");
      v != nullptr && upper(v) == "CRITICAL")
    e.fail_on_nan = true;

  for (auto [variable, flag] : {std::pair{"NEURONSIM_LAUNCH", &e.launch},
                                std::pair{"NEURONSIM_HOST_DISPATCH", &e.host_dispatch},
                                std::pair{"NEURON_LAUNCH_BLOCKING", &e.launch_blocking}})
    if (const char* v = env(variable)) {
      const auto on = parse_env_bool(v);
      if (!on) return fmt::format("{}='{}' is not 0 or 1", variable, v);
      *flag = *on;
    }
  return std::nullopt;
}

}  // namespace neuronsim::sim
