#include "neuronsim/traces/names.h"

#include <fmt/format.h>
#include <array>
#include <cctype>

namespace neuronsim::traces {
namespace {

struct EngineNames {
  std::string_view track, metric, owner;
  int order;
};

// Indexed by isa::Engine (PE, ACT, DVE, POOL, SP).
constexpr std::array<EngineNames, isa::kNumEngines> kEngines = {{
    {"Tensor (PE)", "tensor", "Tensor", 0},
    {"Scalar (ACT)", "scalar", "Scalar", 2},
    {"Vector (DVE)", "vector", "Vector", 1},
    {"GpSimd (Pool)", "gpsimd", "GpSimd", 3},
    {"Sync (SP)", "sync", "Sync", 4},
}};

const EngineNames& names_of(isa::Engine e) {
  const auto i = static_cast<size_t>(e);
  static constexpr EngineNames unknown{"?", "unknown", "Unknown", isa::kNumEngines};
  return i < kEngines.size() ? kEngines[i] : unknown;
}

std::array<std::string, isa::kNumOpcodes> make_slice_names() {
  std::array<std::string, isa::kNumOpcodes> out;
  for (int i = 0; i < isa::kNumOpcodes; ++i) {
    const auto op = static_cast<isa::Opcode>(i);
    std::string name;
    switch (op) {
      case isa::Opcode::activation:
        name = "ACTIVATE";
        break;
      case isa::Opcode::dma_copy:
        name = "DMA_TRIGGER";
        break;
      case isa::Opcode::sem_wait:
      case isa::Opcode::sem_signal:
      case isa::Opcode::sem_set:
        name = "EVENT_SEMAPHORE";
        break;
      default:
        for (char c : isa::opcode_info(op).name)
          name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    out[static_cast<size_t>(i)] = std::move(name);
  }
  return out;
}

}  // namespace

std::string_view kernel_track_name() {
  return "kernels";
}

std::string_view engine_track_name(isa::Engine e) {
  return names_of(e).track;
}
std::string_view engine_metric_name(isa::Engine e) {
  return names_of(e).metric;
}
int engine_track_order(isa::Engine e) {
  return names_of(e).order;
}

std::string dma_queue_name(isa::Engine trigger, uint32_t queue) {
  return fmt::format("q{}IO{}", names_of(trigger).owner, queue);
}

std::string_view opcode_slice_name(isa::Opcode op) {
  static const std::array<std::string, isa::kNumOpcodes> names = make_slice_names();
  const auto i = static_cast<size_t>(op);
  return i < names.size() ? std::string_view(names[i]) : std::string_view("UNKNOWN");
}

}  // namespace neuronsim::traces
