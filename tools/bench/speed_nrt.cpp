// --speed through libnrt.so.1, as a C client pays it: host µs per nrt_execute and per
// nrta_execute_schedule of a small NEFF in functional-only mode (the figures the per-op cost of a
// framework backend rests on). libnrt and this tool share libneuronsim.so: one simulator.
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/kernels/kernels.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"

namespace neuronsim::bench {
namespace {

void check(NRT_STATUS s, const char* what) {
  if (s != NRT_SUCCESS)
    throw std::runtime_error(
        fmt::format("--speed: {} failed (status {})", what, static_cast<int>(s)));
}

// One model with device tensors bound by name, loaded on core 0.
struct NrtModel {
  nrt_model_t* model = nullptr;
  nrt_tensor_set_t* inputs = nullptr;
  nrt_tensor_set_t* outputs = nullptr;
  std::vector<nrt_tensor_t*> tensors;

  explicit NrtModel(const isa::Program& program) {
    const std::vector<uint8_t> neff = isa::neff::write_neff(isa::to_neff(program, "add.neff"));
    check(nrt_load(neff.data(), neff.size(), 0, 1, &model), "nrt_load");
    check(nrt_allocate_tensor_set(&inputs), "nrt_allocate_tensor_set");
    check(nrt_allocate_tensor_set(&outputs), "nrt_allocate_tensor_set");
    for (const isa::TensorDecl& t : program.tensors) {
      if (t.kind != isa::TensorKind::input && t.kind != isa::TensorKind::output) continue;
      nrt_tensor_t* tensor = nullptr;
      check(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t.size_bytes(), t.name.c_str(),
                                &tensor),
            "nrt_tensor_allocate");
      tensors.push_back(tensor);
      check(nrt_add_tensor_to_tensor_set(t.kind == isa::TensorKind::input ? inputs : outputs,
                                         t.name.c_str(), tensor),
            "nrt_add_tensor_to_tensor_set");
    }
  }
  ~NrtModel() {
    nrt_destroy_tensor_set(&inputs);
    nrt_destroy_tensor_set(&outputs);
    for (nrt_tensor_t* t : tensors) nrt_tensor_free(&t);
    nrt_unload(model);
  }
};

}  // namespace

std::string nrt_speed(const Platform& p) {
  // The runtime reads its settings from the environment at nrt_init, as the real one does.
  setenv("NEURONSIM_MODE", "functional-only", 1);
  setenv("NEURONSIM_INSTANCE", p.instance.name.c_str(), 1);
  setenv("NEURON_RT_LOG_LEVEL", "ERROR", 0);
  check(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), "nrt_init");
  std::string out;
  try {
    const isa::Program program =
        kernels::elementwise(p.generation.name, kernels::ElementwiseOp::add, 128, 512);
    NrtModel m(program);
    const double execute =
        median_us(500, [&] { check(nrt_execute(m.model, m.inputs, m.outputs), "nrt_execute"); });
    // One result and sequence number per call, however many median_us makes: a deque keeps
    // the addresses the runtime writes to while later calls are added.
    std::deque<NRT_STATUS> results;
    std::deque<nrta_seq_t> seqs;
    const double schedule = median_us(500, [&] {
      check(nrta_execute_schedule(m.model, m.inputs, m.outputs, 0, &results.emplace_back(),
                                  &seqs.emplace_back()),
            "nrta_execute_schedule");
    });
    for (bool done = false; !done;)
      check(nrta_is_completed(seqs.back(), &done), "nrta_is_completed");
    out = fmt::format(
        "libnrt.so.1, {}-instruction NEFF (add [128,512] fp32), functional-only, median\n"
        "  nrt_execute            {:>8.1f} µs\n  nrta_execute_schedule  {:>8.2f} µs\n\n",
        program.num_instructions(), execute, schedule);
  } catch (...) {
    nrt_close();
    throw;
  }
  nrt_close();
  return out;
}

}  // namespace neuronsim::bench
