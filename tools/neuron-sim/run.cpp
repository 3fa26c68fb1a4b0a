// `neuron-sim run`: executes a NEFF on the simulated instance and reports its
// simulated time, utilisation and traffic; optionally writes outputs, a trace
// and metrics.
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "neuronsim/isa/error.h"
#include "neuronsim/isa/neff.h"
#include "neuronsim/isa/npy.h"
#include "neuronsim/isa/program.h"
#include "neuronsim/sim/device.h"
#include "neuronsim/spec/config.h"
#include "neuronsim/traces/chrome_trace.h"
#include "neuronsim/traces/metrics.h"
#include "neuronsim/traces/profile_summary.h"
#include "neuronsim/traces/summary.h"

namespace neuronsim::tools {
namespace {

namespace fs = std::filesystem;
using isa::DType;

struct RunArgs {
  std::string neff;
  std::vector<std::string> inputs;  // name=file
  bool random_inputs = false;
  uint64_t seed = 0;
  std::string outputs_dir;
  std::string instance;
  uint32_t core = 0;
  std::string trace, metrics, summary_json;
  bool functional_only = false, timing_only = false, quiet = false, raw_outputs = false;
  bool no_launch = false;
};

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open for reading", path.string()));
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
}

// Types NumPy lacks travel as float32 in .npy files (exact: they are subsets of it).
bool travels_as_fp32(DType t) {
  return t == DType::bf16 || t == DType::tf32 || t == DType::fp8_e4m3 || t == DType::fp8_e5m2;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The bytes of tensor `t` from an .npy or raw .bin file, checked against its dtype and shape.
std::vector<uint8_t> load_input(const isa::TensorDecl& t, const fs::path& file,
                                const isa::Fp8Config& fp8) {
  const std::vector<uint8_t> bytes = read_bytes(file);
  if (file.extension() != ".npy") {
    if (bytes.size() != t.size_bytes())
      throw std::runtime_error(fmt::format(
          "input '{}': {} holds {} bytes, the tensor ({} {}) needs {}", t.name, file.string(),
          bytes.size(), isa::dtype_name(t.dtype), shape_text(t.shape), t.size_bytes()));
    return bytes;
  }
  const isa::NpyArray a = isa::parse_npy(bytes, file.string());
  if (a.num_elems() != t.num_elems() || (a.shape != t.shape && a.shape.size() == t.shape.size()))
    throw std::runtime_error(fmt::format("input '{}': {} has shape {}, the tensor needs {}", t.name,
                                         file.string(), shape_text(a.shape), shape_text(t.shape)));
  if (a.descr == isa::npy_descr(t.dtype) && !travels_as_fp32(t.dtype)) return a.data;
  if (a.descr == "<f4" && travels_as_fp32(t.dtype)) {
    std::vector<uint8_t> out(t.size_bytes());
    isa::convert_from_float(t.dtype, reinterpret_cast<const float*>(a.data.data()), out.data(),
                            t.num_elems(), fp8);
    return out;
  }
  throw std::runtime_error(
      fmt::format("input '{}': {} holds '{}' values, the tensor is {} (expected '{}')", t.name,
                  file.string(), a.descr, isa::dtype_name(t.dtype),
                  travels_as_fp32(t.dtype) ? "<f4" : isa::npy_descr(t.dtype)));
}

// Deterministic values in [-1, 1) (integers: small non-negative numbers).
std::vector<uint8_t> random_input(const isa::TensorDecl& t, std::mt19937_64& rng,
                                  const isa::Fp8Config& fp8) {
  std::vector<float> values(t.num_elems());
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 7);
  for (float& v : values) v = isa::is_float(t.dtype) ? real(rng) : static_cast<float>(small(rng));
  std::vector<uint8_t> out(t.size_bytes());
  isa::convert_from_float(t.dtype, values.data(), out.data(), values.size(), fp8);
  return out;
}

std::map<std::string, fs::path> parse_input_args(const std::vector<std::string>& args,
                                                 const isa::Program& p) {
  std::map<std::string, fs::path> out;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error(fmt::format("--inputs '{}': expected name=file", a));
    const std::string name = a.substr(0, eq);
    const isa::TensorDecl* t = p.find_tensor(name);
    if (!t || t->kind != isa::TensorKind::input) {
      std::vector<std::string> names;
      for (const auto& d : p.tensors)
        if (d.kind == isa::TensorKind::input) names.push_back(d.name);
      throw std::runtime_error(fmt::format("--inputs {}: the model has no input '{}' (inputs: {})",
                                           a, name, fmt::join(names, ", ")));
    }
    out[name] = a.substr(eq + 1);
  }
  return out;
}

// The value of every input: from --inputs, else seeded random values with --random-inputs;
// in timing-only mode an input may have none.
std::map<std::string, std::vector<uint8_t>> input_values(const RunArgs& args,
                                                         const isa::Program& program,
                                                         const isa::Fp8Config& fp8) {
  const auto files = parse_input_args(args.inputs, program);
  std::mt19937_64 rng(args.seed);
  std::map<std::string, std::vector<uint8_t>> values;
  for (const isa::TensorDecl& t : program.tensors) {
    if (t.kind != isa::TensorKind::input) continue;
    if (auto f = files.find(t.name); f != files.end())
      values[t.name] = load_input(t, f->second, fp8);
    else if (args.random_inputs)
      values[t.name] = random_input(t, rng, fp8);
    else if (!args.timing_only)
      throw std::runtime_error(
          fmt::format("input '{}' ({} {}) has no value: pass --inputs {}=FILE.npy or "
                      "--random-inputs",
                      t.name, isa::dtype_name(t.dtype), shape_text(t.shape), t.name));
  }
  return values;
}

void write_outputs(const fs::path& dir, const sim::ProgramRun& run, const isa::Fp8Config& fp8,
                   bool raw) {
  fs::create_directories(dir);
  for (const isa::TensorDecl& t : run.program->program().tensors) {
    if (t.kind != isa::TensorKind::output) continue;
    std::vector<uint8_t> bytes = run.outputs.at(t.name);
    if (raw) {
      write_bytes(dir / (t.name + ".bin"), bytes);  // the tensor's own dtype, little-endian
      continue;
    }
    isa::NpyArray a{isa::npy_descr(t.dtype), t.shape, std::move(bytes)};
    if (travels_as_fp32(t.dtype)) {
      std::vector<uint8_t> f32(t.num_elems() * 4);
      isa::convert_to_float(t.dtype, a.data.data(), reinterpret_cast<float*>(f32.data()),
                            t.num_elems(), fp8);
      a = {"<f4", t.shape, std::move(f32)};
    }
    write_bytes(dir / (t.name + ".npy"), isa::write_npy(a));
  }
}

// The instance to simulate: the one asked for, or the smallest of the NEFF's generation.
spec::InstanceConfig choose_instance(const RunArgs& args, const isa::Program& p) {
  if (!args.instance.empty()) {
    spec::InstanceConfig inst = spec::load_instance(args.instance);
    if (inst.generation != p.target)
      throw std::runtime_error(fmt::format("{} was built for {}, but {} is a {} instance",
                                           args.neff, p.target, inst.name, inst.generation));
    return inst;
  }
  for (const std::string& name : spec::instance_names()) {
    spec::InstanceConfig inst = spec::load_instance(name);
    if (inst.generation == p.target && inst.chips == 1) return inst;
  }
  throw std::runtime_error(
      fmt::format("no instance of generation {} is configured; pass --instance", p.target));
}

// Progress on stderr for runs that take more than a moment.
std::function<void(uint64_t, uint64_t)> progress_printer(bool quiet) {
  if (quiet) return {};
  const auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<int>(-1);
  const bool tty = isatty(fileno(stderr));
  return [start, last, tty](uint64_t done, uint64_t total) {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed < std::chrono::seconds(1) || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == *last || (!tty && percent % 10 != 0)) return;
    *last = percent;
    fmt::print(stderr, "{}simulating: {:3d}% ({} of {} instructions){}", tty ? "\r" : "", percent,
               done, total, tty && percent < 100 ? "" : "\n");
  };
}

void run_command(const RunArgs& args) {
  const isa::neff::Neff neff = isa::neff::read_neff_file(args.neff);
  isa::Program program = isa::from_neff(neff, args.neff);
  const spec::InstanceConfig instance = choose_instance(args, program);
  sim::DeviceOptions options;
  options.mode = args.functional_only ? sim::Mode::functional_only
                 : args.timing_only   ? sim::Mode::timing_only
                                      : sim::Mode::functional_and_timing;
  options.progress = progress_printer(args.quiet);
  options.launch = !args.no_launch;
  sim::Device dev(instance, spec::load_generation(instance.generation), options);
  const isa::Fp8Config fp8 = neff.subgraphs.at(0).fp8;
  const auto inputs = input_values(args, program, fp8);
  // The summary's active-time unions come from the records a trace session keeps.
  const bool recorded = !args.trace.empty() || !args.summary_json.empty();
  const sim::ProgramRun run =
      dev.run_program(args.core, std::move(program), neff.header.name, inputs, recorded, fp8);
  const sim::RunResult& result = *run.completion.run;

  if (!args.outputs_dir.empty() && !args.timing_only)
    write_outputs(args.outputs_dir, run, fp8, args.raw_outputs);
  if (run.trace) {
    if (!args.trace.empty()) {
      traces::TraceOptions trace_options;
      trace_options.programs[args.core] = &run.program->program();
      traces::write_chrome_trace(run.trace->result, trace_options, args.trace);
    }
    if (!args.summary_json.empty()) {
      traces::ProfileSummaryOptions summary;
      summary.session = neff.header.name.empty() ? "neuronsim" : neff.header.name;
      traces::write_profile_summary_json(run.trace->result, summary, args.summary_json);
    }
  }
  if (!args.metrics.empty()) traces::write_metrics_json(result, {}, args.metrics);
  if (args.quiet) return;
  fmt::print("{} on {} (core {}){}\n", args.neff, instance.name, args.core,
             args.functional_only ? ", functional only: no timing"
             : args.timing_only   ? ", timing only"
                                  : "");
  if (!args.functional_only) fmt::print("{}", traces::summary_table(result));
  if (!args.outputs_dir.empty() && !args.timing_only)
    fmt::print("outputs written to {}\n", args.outputs_dir);
  if (!args.trace.empty())
    fmt::print("trace written to {} (open in ui.perfetto.dev)\n", args.trace);
  if (!args.metrics.empty()) fmt::print("metrics written to {}\n", args.metrics);
  if (!args.summary_json.empty())
    fmt::print("neuron-profile summary written to {}\n", args.summary_json);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a NEFF on the simulator and report its simulated performance");
  cmd->add_option("neff", args->neff, "NEFF file (produced by neuronsim)")->required();
  cmd->add_option("--inputs", args->inputs,
                  "input values: name=file.npy or name=file.bin (repeatable)");
  cmd->add_flag("--random-inputs", args->random_inputs,
                "fill inputs without --inputs with seeded random values");
  cmd->add_option("--seed", args->seed, "seed of --random-inputs")->default_val(0);
  cmd->add_option("--outputs-dir", args->outputs_dir, "write every output as DIR/<name>.npy");
  cmd->add_flag("--raw-outputs", args->raw_outputs,
                "write outputs as raw <name>.bin in their own dtype");
  cmd->add_option("--instance", args->instance,
                  "instance type (default: the smallest of the NEFF's generation)");
  cmd->add_option("--core", args->core, "NeuronCore to run on")->default_val(0);
  cmd->add_option("--trace", args->trace, "write a Chrome/Perfetto trace (JSON)");
  cmd->add_option("--metrics", args->metrics, "write metrics (JSON)");
  cmd->add_option("--summary-json", args->summary_json,
                  "write neuron-profile's summary (its summary-json fields and units)");
  auto* functional =
      cmd->add_flag("--functional-only", args->functional_only, "compute values only, no timing");
  auto* timing = cmd->add_flag("--timing-only", args->timing_only, "timing only, no arithmetic");
  functional->excludes(timing);
  cmd->add_flag("--no-launch", args->no_launch,
                "leave out the runtime's launch cost (study the kernel body alone)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  cmd->callback([args] { run_command(*args); });
}

}  // namespace neuronsim::tools
