// The configuration nrt_init reads from the environment (docs/runtime-compat.md, "Environment").
// The simulated machine (instance, logical cores, visible cores, mode) comes from
// sim::read_environment, which the PyTorch backend reads too; the rest is the runtime's own.
#include <cstdlib>

#include "runtime.h"

namespace neuronsim::rt {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

std::optional<std::string> read_config(Config& c) {
  if (auto level = parse_log_level(std::getenv("NEURON_RT_LOG_LEVEL")))
    set_log_level(*level);
  else
    return fmt::format(
        "NEURON_RT_LOG_LEVEL='{}' is not one of ERROR, WARN, INFO, DEBUG, TRACE, QUIET",
        std::getenv("NEURON_RT_LOG_LEVEL"));
  if (auto err = sim::read_environment(c)) return err;

  if (const char* v = env("NEURON_RT_EXEC_TIMEOUT")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t >= 0))
      return fmt::format("NEURON_RT_EXEC_TIMEOUT='{}' is not a number of seconds", v);
    c.exec_timeout_s = t;
  }
  if (const char* v = env("NEURON_RT_ROOT_COMM_ID")) c.root_comm_id = v;
  if (const char* v = env("NEURONSIM_TRACE")) {
    // "{rank}" becomes the process's rank in a job (RANK, as torchrun and mpirun-style
    // launchers set it), so that each rank writes its own file for merge_traces.
    c.trace_path = v;
    const std::string rank = env("RANK") ? env("RANK") : "0";
    for (size_t at; (at = c.trace_path.find("{rank}")) != std::string::npos;)
      c.trace_path.replace(at, 6, rank);
  }

  const auto inspect = sim::parse_env_bool(std::getenv("NEURON_RT_INSPECT_ENABLE"));
  if (!inspect)
    return fmt::format("NEURON_RT_INSPECT_ENABLE='{}' is not 0 or 1",
                       std::getenv("NEURON_RT_INSPECT_ENABLE"));
  c.inspect = *inspect;
  if (const char* v = env("NEURON_RT_INSPECT_OUTPUT_DIR")) c.inspect_dir = v;
  if (const char* v = env("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC")) {
    const auto max = sim::parse_env_count(v);
    if (!max || *max == 0)
      return fmt::format(
          "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC='{}' is not a positive number", v);
    c.inspect_max_events = *max;
  }
  return std::nullopt;
}

uint32_t total_logical_cores_from_env(uint32_t* visible) {
  Config c;
  if (!read_config(c)) {
    if (visible) *visible = static_cast<uint32_t>(c.visible.size());
    return c.total_logical_cores();
  }
  return 0;
}

}  // namespace neuronsim::rt
