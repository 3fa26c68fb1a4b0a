// The configuration nrt_init reads from the environment (docs/runtime-compat.md, "Environment").
#include <cctype>
#include <cstdlib>

#include "runtime.h"

namespace neuronsim::rt {

namespace {

bool parse_uint(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  out = v;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<bool> parse_bool(const char* v) {
  if (v == nullptr) return false;
  const std::string s = upper(v);
  if (s.empty() || s == "0" || s == "FALSE" || s == "NO" || s == "OFF") return false;
  if (s == "1" || s == "TRUE" || s == "YES" || s == "ON") return true;
  return std::nullopt;
}

// "n", "a-b" or "a,b,c" (contiguous, ascending).
std::optional<std::string> parse_core_list(const std::string& text, std::vector<uint32_t>& out) {
  out.clear();
  std::string s = trim(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item =
        trim(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    const size_t dash = item.find('-');
    uint64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_uint(item, a)) return fmt::format("'{}' is not a core index", item);
      b = a;
    } else {
      if (!parse_uint(trim(item.substr(0, dash)), a) || !parse_uint(trim(item.substr(dash + 1)), b))
        return fmt::format("'{}' is not a core range", item);
      if (b < a) return fmt::format("the range '{}' is descending", item);
    }
    for (uint64_t c = a; c <= b; ++c) {
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

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

}  // namespace

std::optional<std::string> read_config(Config& c) {
  if (auto level = parse_log_level(std::getenv("NEURON_RT_LOG_LEVEL")))
    set_log_level(*level);
  else
    return fmt::format(
        "NEURON_RT_LOG_LEVEL='{}' is not one of ERROR, WARN, INFO, DEBUG, TRACE, QUIET",
        std::getenv("NEURON_RT_LOG_LEVEL"));

  c.instance_name = env_or("NEURONSIM_INSTANCE", "trn2.3xlarge");
  try {
    c.instance = spec::load_instance(c.instance_name);
    c.generation = spec::load_generation(c.instance.generation);
  } catch (const std::exception& e) {
    return fmt::format("NEURONSIM_INSTANCE='{}': {}", c.instance_name, e.what());
  }

  uint64_t lnc = 1;
  if (const char* v = std::getenv("NEURON_RT_VIRTUAL_CORE_SIZE"); v != nullptr && *v != '\0') {
    if (!parse_uint(trim(v), lnc) || lnc == 0 || c.instance.cores_per_chip % lnc != 0)
      return fmt::format(
          "NEURON_RT_VIRTUAL_CORE_SIZE='{}' must be a positive divisor of the {} cores per chip of "
          "{}",
          v, c.instance.cores_per_chip, c.instance.name);
  }
  c.lnc = static_cast<uint32_t>(lnc);
  const uint32_t total = c.instance.total_cores() / c.lnc;

  c.visible.clear();
  if (const char* v = std::getenv("NEURON_RT_VISIBLE_CORES"); v != nullptr && *v != '\0') {
    if (auto err = parse_core_list(v, c.visible))
      return fmt::format("NEURON_RT_VISIBLE_CORES='{}': {}", v, *err);
    if (c.visible.back() >= total)
      return fmt::format(
          "NEURON_RT_VISIBLE_CORES='{}': core {} does not exist; {} has {} logical cores (0-{})", v,
          c.visible.back(), c.instance.name, total, total - 1);
  } else if (const char* n = std::getenv("NEURON_RT_NUM_CORES"); n != nullptr && *n != '\0') {
    uint64_t count = 0;
    if (!parse_uint(trim(n), count))
      return fmt::format("NEURON_RT_NUM_CORES='{}' is not a number", n);
    if (count > total)
      return fmt::format(
          "NEURON_RT_NUM_CORES={} asks for more cores than the {} logical cores of {}", count,
          total, c.instance.name);
    if (count == 0) count = total;
    for (uint32_t i = 0; i < count; ++i) c.visible.push_back(i);
  } else {
    for (uint32_t i = 0; i < total; ++i) c.visible.push_back(i);
  }

  if (const char* v = std::getenv("NEURON_RT_EXEC_TIMEOUT"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t >= 0))
      return fmt::format("NEURON_RT_EXEC_TIMEOUT='{}' is not a number of seconds", v);
    c.exec_timeout_s = t;
  }
  if (const char* v = std::getenv("NEURON_RT_ROOT_COMM_ID"); v != nullptr && *v != '\0')
    c.root_comm_id = v;
  auto nan = parse_bool(std::getenv("NEURON_FAIL_ON_NAN"));
  if (!nan)
    return fmt::format("NEURON_FAIL_ON_NAN='{}' is not 0 or 1", std::getenv("NEURON_FAIL_ON_NAN"));
  c.fail_on_nan = *nan;
  if (const char* v = std::getenv("NEURON_RT_NUMERICAL_ERRORS_VERBOSITY");
      v != nullptr && upper(v) == "CRITICAL")
    c.fail_on_nan = true;

  const std::string mode = upper(env_or("NEURONSIM_MODE", "FUNCTIONAL-AND-TIMING").c_str());
  if (mode == "FUNCTIONAL-AND-TIMING" || mode == "DEFAULT")
    c.mode = sim::Mode::functional_and_timing;
  else if (mode == "TIMING-ONLY")
    c.mode = sim::Mode::timing_only;
  else if (mode == "FUNCTIONAL-ONLY")
    c.mode = sim::Mode::functional_only;
  else
    return fmt::format(
        "NEURONSIM_MODE='{}' is not functional-and-timing, functional-only or timing-only",
        std::getenv("NEURONSIM_MODE"));

  c.trace_path = env_or("NEURONSIM_TRACE", "");
  auto inspect = parse_bool(std::getenv("NEURON_RT_INSPECT_ENABLE"));
  if (!inspect)
    return fmt::format("NEURON_RT_INSPECT_ENABLE='{}' is not 0 or 1",
                       std::getenv("NEURON_RT_INSPECT_ENABLE"));
  c.inspect = *inspect;
  c.inspect_dir = env_or("NEURON_RT_INSPECT_OUTPUT_DIR", "./output");
  if (const char* v = std::getenv("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC");
      v != nullptr && *v != '\0') {
    if (!parse_uint(trim(v), c.inspect_max_events) || c.inspect_max_events == 0)
      return fmt::format(
          "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC='{}' is not a positive number", v);
  }
  return std::nullopt;
}

uint32_t total_logical_cores_from_env(uint32_t* visible) {
  Config c;
  if (!read_config(c)) {
    if (visible) *visible = static_cast<uint32_t>(c.visible.size());
    return c.instance.total_cores() / c.lnc;
  }
  return 0;
}

}  // namespace neuronsim::rt
