// NKI kernels on the simulator, the C++ half of neuronsim.nki.
//
// The Python front runs a kernel body and writes each instruction it calls as one line of
// neuronsim's assembly (docs/isa.md), in program order, with no semaphores. `build`
// assembles the lines, replays them through an isa::KernelBuilder (which adds the
// semaphores every cross-engine dependency needs) and returns the program; `run` puts it on
// a NeuronCore of a device of its own (the smallest instance of the target's generation)
// and returns the outputs, the simulated time and the summary `neuron-sim run` prints.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "nki/kernel.h"

#include "neuronsim/isa/assembler.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/kernel_builder.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/isa/target.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/spec/config.h"
#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/profile_summary.h"
#include "neuronsim/traces/summary.h"

namespace py = pybind11;

namespace neuronsim::nki {

namespace {

using Program = std::shared_ptr<const isa::Program>;

isa::Engine engine_of(const std::string& line) {
  const std::string word = line.substr(0, line.find(' '));
  const auto engine = isa::parse_engine(word);
  if (!engine) throw std::invalid_argument(fmt::format("no engine '{}' in: {}", word, line));
  return *engine;
}

// The lines as one program whose instructions carry the semaphores their order needs.
Program build(const std::string& target, const std::string& declarations,
              const std::vector<std::string>& lines) {
  std::string text = fmt::format(".target {}\n{}", target, declarations);
  for (const std::string& line : lines) text += line + "\n";
  const isa::Program parsed = isa::assemble(text, "<kernel>");
  isa::KernelBuilder kb(target);
  std::map<uint16_t, uint16_t> ids;  // the assembler's tensor ids -> the builder's
  for (const isa::TensorDecl& t : parsed.tensors) {
    const isa::AccessPattern ap =
        t.kind == isa::TensorKind::input    ? kb.input(t.name, t.dtype, t.shape)
        : t.kind == isa::TensorKind::output ? kb.output(t.name, t.dtype, t.shape)
                                            : kb.scratch(t.name, t.dtype, t.shape);
    ids[t.var_id] = ap.tensor;
  }
  std::array<size_t, isa::kNumEngines> next{};  // each engine's stream, in program order
  for (const std::string& line : lines) {
    const auto e = static_cast<size_t>(engine_of(line));
    isa::Instruction inst = parsed.streams[e].at(next[e]++);
    for (isa::Operand& o : inst.operands)
      if (o.ap.space == isa::MemSpace::HBM) o.ap.tensor = ids.at(o.ap.tensor);
    kb.emit(std::move(inst));
  }
  return std::make_shared<const isa::Program>(kb.finish());
}

sim::Mode mode_of(const std::string& name) {
  if (const std::optional<sim::Mode> mode = sim::parse_mode(name)) return *mode;
  throw std::invalid_argument(
      fmt::format("mode '{}': one of functional-and-timing, functional-only, timing-only", name));
}

py::dict engine_stats(const sim::CoreStats& core, uint64_t total_ps) {
  py::dict engines;
  for (size_t e = 0; e < core.engines.size(); ++e) {
    const sim::EngineStats& s = core.engines[e];
    py::dict one;
    one["instructions"] = s.instructions;
    one["busy_ps"] = s.busy_ps;
    one["utilization"] = total_ps ? static_cast<double>(s.busy_ps) / total_ps : 0.0;
    engines[py::str(std::string(isa::engine_name(static_cast<isa::Engine>(e))))] = one;
  }
  return engines;
}

// Runs `program` once with `inputs` (name -> little-endian bytes of its dtype).
py::dict run(const Program& program, const std::map<std::string, py::bytes>& inputs,
             const std::string& mode, const std::string& trace_path,
             const std::string& summary_path) {
  sim::DeviceOptions options;
  options.mode = mode_of(mode);
  options.launch = false;  // the kernel body alone, as a kernel's latency is quoted
  // The inputs' bytes, copied while the GIL is held.
  std::map<std::string, std::vector<uint8_t>> input_bytes, outputs;
  for (const auto& [name, bytes] : inputs) {
    const std::string_view view(bytes);
    input_bytes[name].assign(view.begin(), view.end());
  }
  std::shared_ptr<const sim::RunResult> result;
  std::string instance, profile_summary;
  {
    py::gil_scoped_release release;
    // The smallest instance of the target's generation (a chip alone when none is configured).
    const std::unique_ptr<sim::Device> device =
        sim::Device::open_generation(program->target, options);
    sim::Device& dev = *device;
    instance = dev.instance().name;
    // A trace, and the summary's active-time unions, need the run's records.
    const bool recorded = !trace_path.empty() || !summary_path.empty();
    sim::ProgramRun run = dev.run_program(0, *program, "nki kernel", input_bytes, recorded);
    result = run.completion.run;
    traces::ProfileSummaryOptions summary;
    summary.session = "nki";
    if (run.trace) {
      traces::TraceOptions trace_options;
      trace_options.programs[0] = &run.program->program();
      if (!trace_path.empty())
        traces::write_chrome_trace(run.trace->result, trace_options, trace_path);
      if (!summary_path.empty())
        traces::write_profile_summary_json(run.trace->result, summary, summary_path);
      profile_summary = traces::profile_summary_json(run.trace->result, summary).dump();
    } else {
      profile_summary = traces::profile_summary_json(*result, summary).dump();
    }
    outputs = std::move(run.outputs);
  }
  py::dict out;
  py::dict values;
  for (const auto& [name, bytes] : outputs)
    values[py::str(name)] = py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  out["outputs"] = values;
  out["instance"] = instance;
  out["mode"] = mode;
  const bool timed = options.mode != sim::Mode::functional_only;
  out["total_ps"] = timed ? result->total_ps : 0;
  out["summary"] = timed ? traces::summary_table(*result) : std::string();
  out["profile_summary"] = timed ? profile_summary : std::string("{}");
  if (timed && !result->cores.empty()) {
    const sim::CoreStats& core = result->cores.front();
    out["engines"] = engine_stats(core, result->total_ps);
    out["dma_bytes"] = core.dma_bytes;
    out["dma_busy_ps"] = core.dma_busy_ps;
    out["hbm_read_bytes"] = core.hbm_read_bytes;
    out["hbm_write_bytes"] = core.hbm_write_bytes;
    out["matmul_flops"] = core.matmul_flops;
  }
  return out;
}

py::dict target_info(const std::string& name) {
  const isa::Target& t = isa::target_by_name(name);
  py::dict d;
  d["name"] = std::string(t.name);
  d["core_version"] = t.core_version;
  d["partitions"] = t.num_partitions;
  d["sbuf_partition_bytes"] = t.sbuf_partition_bytes;
  d["psum_partition_bytes"] = t.psum_partition_bytes;
  d["psum_bank_bytes"] = t.psum_bank_bytes;
  d["pe_stationary_fmax"] = t.pe_stationary_fmax;
  d["pe_moving_fmax"] = t.pe_moving_fmax;
  d["sbuf_free_max"] = t.sbuf_free_max;
  d["psum_free_max"] = t.psum_free_max;
  return d;
}

}  // namespace

void register_nki(py::module_& parent) {
  py::module_ m = parent.def_submodule("nki", "NKI kernels on the simulator (neuronsim.nki)");
  py::class_<isa::Program, std::shared_ptr<isa::Program>>(m, "Program")
      .def_property_readonly("target", [](const isa::Program& p) { return p.target; })
      .def("instructions", [](const isa::Program& p) { return p.num_instructions(); })
      .def("disassemble", [](const isa::Program& p) { return isa::disassemble(p); })
      .def("write_neff", [](const isa::Program& p, const std::string& path) {
        const std::string name = path.substr(path.find_last_of('/') + 1);
        isa::neff::write_neff_file(isa::to_neff(p, name), path);
      });
  m.def("build", [](const std::string& target, const std::string& declarations,
                    const std::vector<std::string>& lines) {
    return std::const_pointer_cast<isa::Program>(build(target, declarations, lines));
  });
  m.def(
      "run",
      [](const std::shared_ptr<isa::Program>& program,
         const std::map<std::string, py::bytes>& inputs, const std::string& mode,
         const std::string& trace, const std::string& summary_json) {
        return run(program, inputs, mode, trace, summary_json);
      },
      py::arg("program"), py::arg("inputs"), py::arg("mode") = "functional-and-timing",
      py::arg("trace") = "", py::arg("summary_json") = "");
  m.def("target", &target_info);
  py::register_exception<isa::AsmError>(m, "AsmError", PyExc_ValueError);
}

}  // namespace neuronsim::nki
