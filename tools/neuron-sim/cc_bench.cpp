// `neuron-sim cc-bench`: a collective benchmark that speaks nccom-test's language (the
// operation as a positional name, its options, its table and closing line), so that scripts
// written for nccom-test run here unchanged (docs/collectives.md §5a). Every rank in this
// process on the simulated fabric (default), one process per rank on loopback (--processes), or
// one rank of a job whose ranks were started by hand (--rank, with NEURON_RT_ROOT_COMM_ID and
// NEURONSIM_JOB_TOKEN). For each message size it prints the simulated time, the algorithm
// bandwidth and the bus bandwidth; --check runs with data and verifies every rank's output
// against a reference computed here.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "neuronsim/cc/algorithms.h"
#include "neuronsim/cc/communicator.h"
#include "neuronsim/cc/fabric.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/cc/tcp.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::tools {
namespace {

using cc::Algorithm;
using cc::Op;
using cc::ReduceOp;
using isa::DType;

struct CcBenchArgs {
  std::string op = "all-reduce";
  std::string positional_op;  // nccom-test's form: `cc-bench allr -r 2`
  int ranks = 2;
  std::string minbytes = "1K", maxbytes = "64M";
  uint64_t stepfactor = 2;
  std::string stepbytes;             // an additive step instead of the factor (nccom-test's -i)
  int iters = 20, warmup_iters = 5;  // accepted as nccom-test's; simulated time is exact
  bool show_algorithm = false;
  std::string report_json;   // nccom-test's --report-to-json-file
  bool quiet_flags = false;  // --non-interactive, --debug: accepted, no effect
  std::string dtype = "fp32";
  std::string algorithm = "auto";
  std::string instance = "trn2.48xlarge";
  std::string reduce_op = "sum";
  std::string placement = "packed";
  std::string mesh_below,
      rdh_below;  // overrides of the generation's thresholds (empty: the config's)
  int root = 0;
  int lnc = 1;                  // physical cores per rank (logical NeuronCore size)
  std::string runtime_release;  // empty: the newest of the configs; "none": no runtime costs
  bool check = false, timing_only = false;
  std::string metrics;
  std::string
      metrics_prefix;       // names in --metrics: <prefix>/<size>B/<metric>; default cc_bench/<op>
  bool processes = false;   // one process per rank on loopback
  std::optional<int> rank;  // run only this rank of a job across processes
  double timeout = 60;      // seconds a rank waits for the others (across processes)
};

// "1024", "1K", "64M", "1G", "2T" (binary multiples; "KB"/"KiB" etc. accepted too).
uint64_t parse_size(const std::string& option, const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::string suffix = text.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() >= 2 && suffix.substr(suffix.size() - 2) == "IB")
    suffix.resize(suffix.size() - 2);
  else if (suffix.size() >= 2 && suffix.back() == 'B')
    suffix.pop_back();
  else if (suffix == "B")
    suffix.clear();
  int shift = -1;
  if (suffix.empty())
    shift = 0;
  else if (suffix == "K")
    shift = 10;
  else if (suffix == "M")
    shift = 20;
  else if (suffix == "G")
    shift = 30;
  else if (suffix == "T")
    shift = 40;
  if (i == 0 || shift < 0 || i > 15)
    throw std::runtime_error(
        fmt::format("{} '{}': expected a size such as 1024, 1K, 64M or 1G", option, text));
  const uint64_t n = std::stoull(text.substr(0, i));
  if (n > (uint64_t{1} << 50) >> shift)
    throw std::runtime_error(fmt::format("{} '{}': too large", option, text));
  return n << shift;
}

std::string normalize(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '_') c = '-';
  }
  return s;
}

struct OpChoice {
  Op op;
  bool send_recv = false;
};

OpChoice parse_op(const std::string& text) {
  const std::string s = normalize(text);
  // nccom-test's names and short names (allr, allg, redsct) too.
  if (s == "all-reduce" || s == "allreduce" || s == "allr") return {Op::all_reduce};
  if (s == "all-gather" || s == "allgather" || s == "allg") return {Op::all_gather};
  if (s == "reduce-scatter" || s == "reducescatter" || s == "redsct") return {Op::reduce_scatter};
  if (s == "all-to-all" || s == "alltoall") return {Op::all_to_all};
  if (s == "broadcast") return {Op::broadcast};
  if (s == "reduce") return {Op::reduce};
  if (s == "permute") return {Op::permute};
  if (s == "send-recv" || s == "sendrecv") return {Op::permute, true};
  if (s == "all-gatherv" || s == "allgv" || s == "alltoallv")
    throw std::runtime_error(fmt::format(
        "operation '{}': the variable-size collectives of nccom-test are not supported yet", text));
  throw std::runtime_error(
      fmt::format("operation '{}': unknown (known: all-reduce/allr, all-gather/allg, "
                  "reduce-scatter/redsct, all-to-all/alltoall, broadcast, reduce, permute, "
                  "send-recv/sendrecv)",
                  text));
}

DType parse_dtype_arg(const std::string& text) {
  const std::string s = normalize(text);
  struct Name {
    const char* name;
    DType t;
  };
  static const Name names[] = {
      {"fp32", DType::fp32},         {"float32", DType::fp32},   {"bf16", DType::bf16},
      {"bfloat16", DType::bf16},     {"fp16", DType::fp16},      {"float16", DType::fp16},
      {"tf32", DType::tf32},         {"fp8e4", DType::fp8_e4m3}, {"fp8", DType::fp8_e4m3},
      {"fp8-e4m3", DType::fp8_e4m3}, {"fp8e5", DType::fp8_e5m2}, {"fp8-e5m2", DType::fp8_e5m2},
      {"int8", DType::int8},         {"uint8", DType::uint8},    {"int16", DType::int16},
      {"uint16", DType::uint16},     {"int32", DType::int32},    {"uint32", DType::uint32},
  };
  for (const Name& n : names)
    if (s == n.name) return n.t;
  throw std::runtime_error(
      fmt::format("--dtype '{}': unknown data type (known: fp32, bf16, fp16, tf32, fp8e4, fp8e5, "
                  "int8, uint8, int16, uint16, int32, uint32)",
                  text));
}

// The data type as nccom-test's `type` column and --datatype name it.
std::string_view short_dtype_name(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
    case DType::tf32:
      return "tf32";
    case DType::fp8_e4m3:
      return "fp8e4";
    case DType::fp8_e5m2:
      return "fp8e5";
    default:
      return isa::dtype_name(t);  // int8, uint8, ... as nccom-test writes them
  }
}

Algorithm parse_algorithm(const std::string& text) {
  const std::string s = normalize(text);
  if (s == "auto") return Algorithm::auto_select;
  if (s == "ring") return Algorithm::ring;
  if (s == "mesh") return Algorithm::mesh;
  if (s == "rdh") return Algorithm::rdh;
  if (s == "hier2d") return Algorithm::hier2d;
  if (s == "hierarchical") return Algorithm::hierarchical;
  throw std::runtime_error(fmt::format(
      "--algorithm '{}': unknown algorithm (known: auto, ring, mesh, rdh, hier2d, hierarchical)",
      text));
}

ReduceOp parse_reduce_op(const std::string& text) {
  const std::string s = normalize(text);
  if (s == "sum") return ReduceOp::sum;
  if (s == "prod") return ReduceOp::prod;
  if (s == "max") return ReduceOp::max;
  if (s == "min") return ReduceOp::min;
  if (s == "avg") return ReduceOp::avg;
  throw std::runtime_error(
      fmt::format("--reduce-op '{}': unknown reduction (known: sum, prod, max, min, avg)", text));
}

bool reduces(Op op) {
  return op == Op::all_reduce || op == Op::reduce_scatter || op == Op::reduce;
}
// Operations whose size is the whole of R blocks (nccl-tests: the larger of input and output).
bool blocked(Op op) {
  return op == Op::all_gather || op == Op::reduce_scatter || op == Op::all_to_all;
}

// ------------------------------------------------------------------ data and reference

// Deterministic inputs: floats in [-1, 1); integers 0..3 (so sums only grow: a saturating sum
// gives the same result in any order). For prod, ranks from 2 on hold only +-1 (1 for
// unsigned), so the product stays in range whatever the rank count.
std::vector<uint8_t> make_input(const cc::CollectiveSpec& spec, int ranks, int rank) {
  const size_t es = isa::dtype_size(spec.dtype);
  const uint64_t n = spec.input_bytes(ranks, rank) / es;
  std::vector<float> v(n);
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 3), coin(0, 1);
  const bool fp = isa::is_float(spec.dtype);
  const bool unit = spec.reduce == ReduceOp::prod && reduces(spec.op) && rank >= 2;
  for (float& x : v) {
    if (unit)
      x = (fp || isa::is_signed_int(spec.dtype)) ? (coin(rng) ? 1.0f : -1.0f) : 1.0f;
    else
      x = fp ? real(rng) : static_cast<float>(small(rng));
  }
  std::vector<uint8_t> out(n * es);
  isa::convert_from_float(spec.dtype, v.data(), out.data(), n);
  return out;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::fp32:
      return std::ldexp(1.0, -23);
    case DType::tf32:
      return std::ldexp(1.0, -10);
    case DType::bf16:
      return std::ldexp(1.0, -7);
    case DType::fp16:
      return std::ldexp(1.0, -10);
    case DType::fp8_e4m3:
      return std::ldexp(1.0, -3);
    case DType::fp8_e5m2:
      return std::ldexp(1.0, -2);
    default:
      return 0.0;
  }
}
// The smallest spacing near zero (subnormals), for an absolute floor on the error.
double tiny_spacing(DType t) {
  switch (t) {
    case DType::fp32:
      return std::ldexp(1.0, -126);
    case DType::tf32:
      return std::ldexp(1.0, -126);
    case DType::bf16:
      return std::ldexp(1.0, -126);
    case DType::fp16:
      return std::ldexp(1.0, -24);
    case DType::fp8_e4m3:
      return std::ldexp(1.0, -9);
    case DType::fp8_e5m2:
      return std::ldexp(1.0, -16);
    default:
      return 0.0;
  }
}

struct Expected {
  double value = 0, scale = 0;  // scale: the magnitude the rounding error is relative to
};

// Element i of the reduction of element `at` over the ranks' inputs.
Expected combine(const cc::CollectiveSpec& spec, const std::vector<std::vector<float>>& in,
                 uint64_t at, int ranks) {
  Expected e;
  double v = in[0][at], mag = std::fabs(v);
  for (int r = 1; r < ranks; ++r) {
    const double x = in[static_cast<size_t>(r)][at];
    switch (spec.reduce) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        v += x;
        mag += std::fabs(x);
        break;
      case ReduceOp::prod:
        v *= x;
        mag *= std::fabs(x);
        break;
      case ReduceOp::max:
        v = std::max(v, x);
        break;
      case ReduceOp::min:
        v = std::min(v, x);
        break;
    }
  }
  if (spec.reduce == ReduceOp::avg) {
    v /= ranks;
    mag /= ranks;
  }
  if (!isa::is_float(
          spec.dtype)) {  // integer arithmetic saturates to the type (inputs are non-negative)
    uint8_t buf[8] = {};
    isa::store_from_float(spec.dtype, static_cast<float>(v), buf);
    const double stored = isa::load_as_float(spec.dtype, buf);
    if (spec.reduce != ReduceOp::avg) v = stored;
  }
  e.value = v;
  e.scale = mag;
  return e;
}

// How many elements of the outputs of ranks `local` (outputs[i] is local[i]'s) differ from the
// reference; `inputs` holds every rank's input.
uint64_t count_errors(const cc::CollectiveSpec& spec, int ranks,
                      const std::vector<std::vector<uint8_t>>& inputs,
                      const std::vector<int>& local,
                      const std::vector<std::vector<uint8_t>>& outputs) {
  const size_t es = isa::dtype_size(spec.dtype);
  const uint64_t C = spec.count;
  std::vector<std::vector<float>> in(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    in[static_cast<size_t>(r)].resize(inputs[static_cast<size_t>(r)].size() / es);
    isa::convert_to_float(spec.dtype, inputs[static_cast<size_t>(r)].data(),
                          in[static_cast<size_t>(r)].data(), in[static_cast<size_t>(r)].size());
  }
  const double u = unit_roundoff(spec.dtype), tiny = tiny_spacing(spec.dtype);
  uint64_t errors = 0;
  auto compare_bytes = [&](const std::vector<uint8_t>& got, const uint8_t* want, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i)
      if (std::memcmp(got.data() + i * es, want + i * es, es) != 0) ++errors;
  };
  for (size_t k = 0; k < local.size(); ++k) {
    const int r = local[k];
    const std::vector<uint8_t>& got = outputs[k];
    const uint64_t want_bytes = spec.output_bytes(ranks, r);
    if (got.size() != want_bytes) {  // a wrong size counts every expected element as wrong
      errors += std::max<uint64_t>(want_bytes, got.size()) / es;
      continue;
    }
    switch (spec.op) {
      case Op::all_reduce:
      case Op::reduce_scatter:
      case Op::reduce: {
        if (got.empty()) break;  // reduce: only the root has a result
        const uint64_t base = spec.op == Op::reduce_scatter ? C * static_cast<uint64_t>(r) : 0;
        for (uint64_t i = 0; i < C; ++i) {
          const Expected e = combine(spec, in, base + i, ranks);
          const double g = isa::load_as_float(spec.dtype, got.data() + i * es);
          double tol = (ranks + 2) * u * e.scale + (ranks + 2) * tiny;
          if (!isa::is_float(spec.dtype)) tol = spec.reduce == ReduceOp::avg ? 1.0 : 0.0;
          if (!(std::fabs(g - e.value) <= tol)) ++errors;
        }
        break;
      }
      case Op::all_gather:
        for (int j = 0; j < ranks; ++j)
          compare_bytes(
              std::vector<uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(C * es * j),
                                   got.begin() + static_cast<std::ptrdiff_t>(C * es * (j + 1))),
              inputs[static_cast<size_t>(j)].data(), C);
        break;
      case Op::all_to_all:
        for (int j = 0; j < ranks; ++j)
          compare_bytes(
              std::vector<uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(C * es * j),
                                   got.begin() + static_cast<std::ptrdiff_t>(C * es * (j + 1))),
              inputs[static_cast<size_t>(j)].data() + C * es * static_cast<uint64_t>(r), C);
        break;
      case Op::broadcast:
        compare_bytes(got, inputs[static_cast<size_t>(spec.root)].data(), C);
        break;
      case Op::permute: {
        if (got.empty()) break;
        int src = -1;
        for (int s = 0; s < ranks; ++s)
          if (spec.peers[static_cast<size_t>(s)] == r) src = s;
        if (src < 0)
          errors += got.size() / es;
        else
          compare_bytes(got, inputs[static_cast<size_t>(src)].data(), C);
        break;
      }
      default:
        break;
    }
  }
  return errors;
}

// ------------------------------------------------------------------ the command

struct Row {
  uint64_t bytes = 0, count = 0;
  Algorithm algorithm = Algorithm::auto_select;
  double time_us = 0, algbw = 0, busbw = 0;
  std::optional<uint64_t> errors;
};

// The settings of a run, checked.
struct Bench {
  std::string op_text;     // as given (positional or --op)
  uint64_t stepbytes = 0;  // additive step between sizes; 0: multiply by --stepfactor
  OpChoice choice;
  DType dtype = DType::fp32;
  Algorithm algorithm = Algorithm::auto_select;
  ReduceOp reduce = ReduceOp::sum;
  spec::InstanceConfig inst;
  int R = 0;
  uint64_t minbytes = 0, maxbytes = 0;
  cc::RunOptions options;
  std::string placement, op_label;
  bool with_data = true;
  uint32_t instances = 1;  // of the instance type the job spans
  int group = 0;           // ranks per host across hosts (Fabric::ranks_per_entry), 0 on one
};

Bench check_args(const CcBenchArgs& args) {
  if (args.check && args.timing_only)
    throw std::runtime_error("--check needs data: it cannot be combined with --timing-only");
  if (args.processes && args.rank)
    throw std::runtime_error(
        "--processes starts every rank itself: it cannot be combined with --rank");
  if (!(args.timeout > 0))
    throw std::runtime_error(
        fmt::format("--timeout {}: must be a positive number of seconds", args.timeout));
  Bench b;
  b.op_text = args.positional_op.empty() ? args.op : args.positional_op;
  b.choice = parse_op(b.op_text);
  b.dtype = parse_dtype_arg(args.dtype);
  b.algorithm = parse_algorithm(args.algorithm);
  b.reduce = parse_reduce_op(args.reduce_op);
  b.inst = spec::load_instance(args.instance);
  const int R = b.R = args.ranks;
  if (R < 2)
    throw std::runtime_error(fmt::format("--ranks {}: a collective needs at least 2 ranks", R));
  if (args.rank && (*args.rank < 0 || *args.rank >= R))
    throw std::runtime_error(
        fmt::format("--rank {}: must be a rank of the job, 0 to {}", *args.rank, R - 1));
  b.minbytes = parse_size("--minbytes", args.minbytes);
  b.maxbytes = parse_size("--maxbytes", args.maxbytes);
  if (b.minbytes == 0) throw std::runtime_error("--minbytes must be at least 1");
  if (b.minbytes > b.maxbytes)
    throw std::runtime_error(
        fmt::format("--minbytes {} is larger than --maxbytes {}", args.minbytes, args.maxbytes));
  if (args.stepfactor < 2)
    throw std::runtime_error(fmt::format("--stepfactor {}: must be at least 2", args.stepfactor));
  if (!args.stepbytes.empty()) {
    b.stepbytes = parse_size("--stepbytes", args.stepbytes);
    if (b.stepbytes == 0) throw std::runtime_error("--stepbytes must be at least 1");
  }
  if (args.iters < 1)
    throw std::runtime_error(fmt::format("--iters {}: must be at least 1", args.iters));
  if (args.warmup_iters < 0)
    throw std::runtime_error(
        fmt::format("--warmup_iters {}: must not be negative", args.warmup_iters));
  if (args.root < 0 || args.root >= R)
    throw std::runtime_error(fmt::format("--root {}: must be a rank, 0 to {}", args.root, R - 1));
  b.options.algorithm = b.algorithm;
  cc::Thresholds t = cc::thresholds_for(b.inst);
  if (!args.mesh_below.empty()) t.mesh_below_bytes = parse_size("--mesh-below", args.mesh_below);
  if (!args.rdh_below.empty()) t.rdh_below_bytes = parse_size("--rdh-below", args.rdh_below);
  if (t.rdh_below_bytes < t.mesh_below_bytes)
    throw std::runtime_error(fmt::format(
        "--rdh-below {} is below --mesh-below {}: mesh, then RDH, then ring as sizes grow",
        t.rdh_below_bytes, t.mesh_below_bytes));
  b.options.thresholds = t;
  try {
    b.options.runtime = cc::RuntimeCosts::load(args.runtime_release);
  } catch (const spec::ConfigError& e) {
    throw std::runtime_error(
        fmt::format("--runtime-release {}: {}", args.runtime_release, e.what()));
  }
  b.placement = normalize(args.placement);
  if (b.placement == "packed")
    b.options.placement = cc::Placement::packed;
  else if (b.placement == "one-per-chip")
    b.options.placement = cc::Placement::one_per_chip;
  else
    throw std::runtime_error(
        fmt::format("--placement '{}': expected packed or one-per-chip", args.placement));
  b.options.lnc = args.lnc;
  try {
    cc::Fabric::check_lnc(b.inst, args.lnc);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("--lnc {}: {}", args.lnc, e.what()));
  }
  // More ranks than one instance holds: several instances joined by EFA, where the type has it.
  try {
    const cc::Fabric fabric = cc::Fabric::make(b.inst, R, b.options.placement, b.options.lnc);
    b.instances = fabric.instances();
    b.group = fabric.ranks_per_entry();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("--ranks {} on {}: {}", R, b.inst.name, e.what()));
  }
  if (b.algorithm != Algorithm::auto_select &&
      !cc::algorithm_supported(b.choice.op, b.algorithm, R, b.group)) {
    std::string why;
    if (b.algorithm == Algorithm::rdh && (R & (R - 1)) != 0)
      why = fmt::format(" (rdh needs a power-of-two rank count, not {})", R);
    else if (b.algorithm == Algorithm::hier2d)
      why = " (hier2d is all-reduce only, on a multiple of 4 ranks, at least 8)";
    else if (b.algorithm == Algorithm::hierarchical)
      why = " (hierarchical is all-reduce, all-gather or reduce-scatter, across two or more hosts)";
    else if (b.choice.op == Op::all_to_all || b.choice.op == Op::permute)
      why = " (this operation is mesh only)";
    throw std::runtime_error(fmt::format("--algorithm {} is not available for {} on {} ranks{}",
                                         cc::algorithm_name(b.algorithm), b.op_text, R, why));
  }
  b.op_label = b.choice.send_recv ? "send_recv" : std::string(cc::op_name(b.choice.op));
  b.with_data = !args.timing_only;
  return b;
}

// The collective of one row: `size` bytes (the larger of one rank's input and output, as
// nccl-tests and nccom-test count it); count 0 when not even one element fits.
cc::CollectiveSpec spec_for(const Bench& b, int root, uint64_t size) {
  const int R = b.R;
  cc::CollectiveSpec spec;
  spec.op = b.choice.op;
  spec.reduce = b.reduce;
  spec.dtype = b.dtype;
  spec.root = root;
  const uint64_t elems = size / isa::dtype_size(b.dtype);
  spec.count = blocked(b.choice.op) ? elems / static_cast<uint64_t>(R) : elems;
  if (b.choice.op == Op::permute) {
    if (b.choice.send_recv)
      spec = cc::send_recv_spec(R, 0, R - 1, b.dtype, spec.count);
    else {
      spec.peers.resize(static_cast<size_t>(R));
      for (int r = 0; r < R; ++r) spec.peers[static_cast<size_t>(r)] = (r + 1) % R;
    }
  }
  return spec;
}

std::unique_ptr<cc::Communicator> make_communicator(const CcBenchArgs& args, const Bench& b) {
  if (!args.rank) return std::make_unique<cc::FabricCommunicator>(b.inst, b.R, b.options);
  cc::TcpOptions o;
  cc::read_tcp_environment(o);
  o.rank = *args.rank;
  o.world_size = b.R;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout * 1000));
  o.instance = b.inst;
  o.run = b.options;
  return cc::TcpCommunicator::connect(std::move(o));
}

// Wrong elements over the whole job: each process counted its own ranks'.
uint64_t job_errors(cc::Communicator& comm, uint64_t mine) {
  if (comm.local_ranks().size() == static_cast<size_t>(comm.world_size())) return mine;
  cc::CollectiveSpec gather{Op::all_gather, ReduceOp::sum, DType::uint8, 8, 0, {}, {}};
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &mine, 8);
  const auto out = comm.run(gather, {{comm.local_ranks()[0], 0, bytes}}, true);
  uint64_t total = 0;
  for (size_t i = 0; i + 8 <= out.outputs[0].size(); i += 8) {
    uint64_t v = 0;
    std::memcpy(&v, out.outputs[0].data() + i, 8);
    total += v;
  }
  return total;
}

void write_metrics(const CcBenchArgs& args, const Bench& b, const std::vector<Row>& rows) {
  nlohmann::json metrics = nlohmann::json::array(), results = nlohmann::json::array();
  for (const Row& r : rows) {
    const std::string prefix = fmt::format(
        "{}/{}B", args.metrics_prefix.empty() ? "cc_bench/" + b.op_label : args.metrics_prefix,
        r.bytes);
    metrics.push_back({{"name", prefix + "/time_us"}, {"unit", "us"}, {"value", r.time_us}});
    metrics.push_back({{"name", prefix + "/algbw"}, {"unit", "GiB/s"}, {"value", r.algbw}});
    metrics.push_back({{"name", prefix + "/busbw"}, {"unit", "GiB/s"}, {"value", r.busbw}});
    nlohmann::json rec = {{"size_bytes", r.bytes},
                          {"count", r.count},
                          {"dtype", isa::dtype_name(b.dtype)},
                          {"algorithm", cc::algorithm_name(r.algorithm)},
                          {"time_us", r.time_us},
                          {"algbw_gib_per_s", r.algbw},
                          {"busbw_gib_per_s", r.busbw}};
    if (r.errors) rec["errors"] = *r.errors;
    results.push_back(rec);
  }
  nlohmann::json doc = {{"metrics", metrics},
                        {"details",
                         {{"op", b.op_label},
                          {"ranks", b.R},
                          {"instance", b.inst.name},
                          {"dtype", isa::dtype_name(b.dtype)},
                          {"reduce_op", cc::reduce_op_name(b.reduce)},
                          {"algorithm", cc::algorithm_name(b.algorithm)},
                          {"placement", b.placement},
                          {"runtime_release", b.options.runtime->release},
                          {"timing_only", args.timing_only},
                          {"processes", args.rank ? b.R : 1},
                          {"bus_bandwidth_factor", cc::bus_bandwidth_factor(b.choice.op, b.R)},
                          {"results", results}}}};
  std::ofstream out(args.metrics);
  out << doc.dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", args.metrics));
  fmt::print("# metrics written to {}\n", args.metrics);
}

// One line of nccom-test's table: columns right-aligned, four spaces apart; #wrong (with
// --check) after busbw, the algorithm last and only with --show-algorithm, as nccom-test.
void print_row(const CcBenchArgs& args, std::string_view size, std::string_view count,
               std::string_view type, std::string_view time, std::string_view algbw,
               std::string_view busbw, std::string_view wrong, std::string_view algorithm) {
  std::string line = fmt::format("{:>12}    {:>12}    {:>5}    {:>12}    {:>11}    {:>11}", size,
                                 count, type, time, algbw, busbw);
  if (args.check) line += fmt::format("    {:>6}", wrong);
  if (args.show_algorithm) line += fmt::format("    {:>9}", algorithm);
  fmt::print("{}\n", line);
}

// nccom-test's --report-to-json-file: {"results": [{"size(B)", "count(elems)", "type",
// "algbw(GB/s)", "busbw(GB/s)", "time:avg(us)"}, ...]}, bandwidths unrounded.
void write_nccom_report(const CcBenchArgs& args, const Bench& b, const std::vector<Row>& rows) {
  nlohmann::json results = nlohmann::json::array();
  for (const Row& r : rows)
    results.push_back({{"size(B)", r.bytes},
                       {"count(elems)", r.count},
                       {"type", short_dtype_name(b.dtype)},
                       {"algbw(GB/s)", r.algbw},
                       {"busbw(GB/s)", r.busbw},
                       {"time:avg(us)", r.time_us}});
  std::ofstream out(args.report_json);
  out << nlohmann::json{{"results", results}}.dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", args.report_json));
}

void cc_bench_command(const CcBenchArgs& args) {
  const auto wall_start = std::chrono::steady_clock::now();
  const Bench b = check_args(args);
  const int R = b.R;
  const size_t es = isa::dtype_size(b.dtype);
  auto comm = make_communicator(args, b);
  const bool report = !args.rank || *args.rank == 0;  // rank 0 speaks for a job across processes
  const std::string where =
      args.rank ? fmt::format(", one process per rank ({} of them)", R) : std::string();

  if (report) {
    const std::string of = b.instances > 1
                               ? fmt::format("{} x {}", b.instances / b.inst.instances, b.inst.name)
                               : b.inst.name;
    fmt::print(
        "# cc-bench: {} on {} ranks of {} ({} chips x {} cores{}, placement {}), {}{}, algorithm "
        "{}, runtime release {}, {}{}\n",
        b.op_label, R, of, b.inst.chips, b.inst.cores_per_chip,
        b.instances > 1 ? ", joined by EFA" : "", b.placement, isa::dtype_name(b.dtype),
        reduces(b.choice.op) ? fmt::format(", reduce {}", cc::reduce_op_name(b.reduce))
                             : std::string(),
        b.algorithm == Algorithm::auto_select
            ? fmt::format(
                  "auto (mesh below {} B, rdh below {} B)",
                  cc::thresholds_for(*b.options.thresholds, *b.options.runtime).mesh_below_bytes,
                  cc::thresholds_for(*b.options.thresholds, *b.options.runtime).rdh_below_bytes)
            : std::string(cc::algorithm_name(b.algorithm)),
        b.options.runtime->release,
        args.timing_only ? "timing only"
        : args.check     ? "with data, checked"
                         : "with data",
        where);
    print_row(args, "size(B)", "count(elems)", "type", "time:avg(us)", "algbw(GB/s)", "busbw(GB/s)",
              "#wrong", "algorithm");
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  uint64_t failed_sizes = 0;
  for (uint64_t size = b.minbytes; size <= b.maxbytes;) {
    const cc::CollectiveSpec spec = spec_for(b, args.root, size);
    const uint64_t next = b.stepbytes                           ? size + b.stepbytes
                          : size > b.maxbytes / args.stepfactor ? b.maxbytes + 1
                                                                : size * args.stepfactor;
    size = next;
    if (spec.count == 0) continue;  // smaller than one element per block
    Row row;
    row.count = blocked(b.choice.op) ? spec.count * static_cast<uint64_t>(R) : spec.count;
    row.bytes = row.count * es;
    std::vector<cc::RankCall> calls;
    for (int r : comm->local_ranks())
      calls.push_back({r, 0, b.with_data ? make_input(spec, R, r) : std::vector<uint8_t>()});
    cc::CollectiveOutcome result = comm->run(spec, std::move(calls), b.with_data);
    // Test hook: NEURONSIM_CC_BENCH_CORRUPT=1 flips a bit of the last rank's output, so that
    // the tests can see --check catch a wrong value and exit 1.
    if (const char* corrupt = std::getenv("NEURONSIM_CC_BENCH_CORRUPT");
        corrupt && std::string(corrupt) == "1")
      if (comm->local_ranks().back() == R - 1 && !result.outputs.empty() &&
          !result.outputs.back().empty())
        result.outputs.back()[es - 1] ^= 0x40;
    if (args.check) {
      std::vector<std::vector<uint8_t>> inputs;
      for (int r = 0; r < R; ++r) inputs.push_back(make_input(spec, R, r));
      row.errors =
          job_errors(*comm, count_errors(spec, R, inputs, comm->local_ranks(), result.outputs));
      if (*row.errors) ++failed_sizes;
    }
    row.algorithm = result.algorithm;
    const double seconds = static_cast<double>(result.duration_ps()) * 1e-12;
    row.time_us = seconds * 1e6;
    row.algbw = seconds > 0 ? static_cast<double>(row.bytes) / seconds / double(1ull << 30) : 0.0;
    row.busbw = row.algbw * cc::bus_bandwidth_factor(b.choice.op, R);
    if (report) {
      print_row(args, fmt::to_string(row.bytes), fmt::to_string(row.count),
                short_dtype_name(b.dtype), fmt::format("{:.2f}", row.time_us),
                fmt::format("{:.2f}", row.algbw), fmt::format("{:.2f}", row.busbw),
                row.errors ? fmt::to_string(*row.errors) : "", cc::algorithm_name(row.algorithm));
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  if (rows.empty())
    throw std::runtime_error(fmt::format(
        "no size from --minbytes {} to --maxbytes {} holds one {} element{}", args.minbytes,
        args.maxbytes, isa::dtype_name(b.dtype), blocked(b.choice.op) ? " per rank" : ""));
  if (report) {
    fmt::print(
        "# wall time: {:.2f} s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
    if (!args.metrics.empty()) write_metrics(args, b, rows);
    if (!args.report_json.empty()) write_nccom_report(args, b, rows);
    // nccom-test's closing line, last: the mean of the busbw column ("GB/s" are GiB/s there).
    double busbw_sum = 0;
    for (const Row& r : rows) busbw_sum += r.busbw;
    fmt::print("Avg bus bandwidth:\t{:.4f}GB/s\n", busbw_sum / static_cast<double>(rows.size()));
  }
  if (failed_sizes)
    throw std::runtime_error(fmt::format("cc-bench --check: {} of {} sizes had wrong values",
                                         failed_sizes, rows.size()));
}

// A port on loopback that is free now (the kernel picks it; rank 0 binds it a moment later).
uint16_t free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(
        fmt::format("--processes: no free port on loopback: {}", std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

// --processes: this process starts one `neuron-sim cc-bench --rank r` per rank, with rank 0's
// address and a fresh job token in their environment, and waits for all of them. Rank 0 prints
// the table; any rank's error is printed by that rank.
void run_processes(const CcBenchArgs& args) {
  const Bench b = check_args(args);  // fail here, once, rather than in every rank
  const std::string root = fmt::format("127.0.0.1:{}", free_loopback_port());
  ::setenv("NEURON_RT_ROOT_COMM_ID", root.c_str(), 1);
  ::setenv("NEURONSIM_JOB_TOKEN", random_token().c_str(), 1);
  std::vector<std::string> common{"cc-bench",
                                  "--op",
                                  b.op_text,
                                  "--ranks",
                                  std::to_string(b.R),
                                  "--minbytes",
                                  args.minbytes,
                                  "--maxbytes",
                                  args.maxbytes,
                                  "--stepfactor",
                                  std::to_string(args.stepfactor),
                                  "--dtype",
                                  args.dtype,
                                  "--algorithm",
                                  args.algorithm,
                                  "--instance",
                                  args.instance,
                                  "--reduce-op",
                                  args.reduce_op,
                                  "--placement",
                                  args.placement,
                                  "--root",
                                  std::to_string(args.root),
                                  "--timeout",
                                  fmt::format("{}", args.timeout),
                                  "--lnc",
                                  std::to_string(args.lnc)};
  if (!args.mesh_below.empty()) common.insert(common.end(), {"--mesh-below", args.mesh_below});
  if (!args.rdh_below.empty()) common.insert(common.end(), {"--rdh-below", args.rdh_below});
  if (!args.runtime_release.empty())
    common.insert(common.end(), {"--runtime-release", args.runtime_release});
  if (args.check) common.push_back("--check");
  if (args.show_algorithm) common.push_back("--show-algorithm");
  if (!args.stepbytes.empty()) common.insert(common.end(), {"--stepbytes", args.stepbytes});
  if (args.timing_only) common.push_back("--timing-only");
  fmt::print("# cc-bench: starting {} processes, rank 0 at {}\n", b.R, root);
  std::fflush(stdout);

  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<pid_t> pids;
  for (int r = 0; r < b.R; ++r) {
    std::vector<std::string> argv_s{exe};
    argv_s.insert(argv_s.end(), common.begin(), common.end());
    argv_s.insert(argv_s.end(), {"--rank", std::to_string(r)});
    if (r == 0 && !args.metrics.empty()) argv_s.insert(argv_s.end(), {"--metrics", args.metrics});
    if (r == 0 && !args.metrics_prefix.empty())
      argv_s.insert(argv_s.end(), {"--metrics-prefix", args.metrics_prefix});
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (const int err = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
        err != 0)
      throw std::runtime_error(
          fmt::format("--processes: cannot start rank {} ({}): {}", r, exe, std::strerror(err)));
    pids.push_back(pid);
  }
  std::vector<std::string> failures;
  for (int r = 0; r < b.R; ++r) {
    int status = 0;
    if (::waitpid(pids[static_cast<size_t>(r)], &status, 0) < 0)
      failures.push_back(fmt::format("rank {}: waitpid: {}", r, std::strerror(errno)));
    else if (WIFSIGNALED(status))
      failures.push_back(fmt::format("rank {} was killed by signal {}", r, WTERMSIG(status)));
    else if (WEXITSTATUS(status) != 0)
      failures.push_back(fmt::format("rank {} exited with status {}", r, WEXITSTATUS(status)));
  }
  if (!failures.empty())
    throw std::runtime_error(fmt::format("cc-bench --processes: {}", fmt::join(failures, "; ")));
}

}  // namespace

void add_cc_bench_command(CLI::App& app) {
  auto args = std::make_shared<CcBenchArgs>();
  CLI::App* cmd = app.add_subcommand("cc-bench",
                                     "Benchmark a collective on the simulated fabric (nccom-test "
                                     "style): time, algbw and busbw per size");
  auto* positional =
      cmd->add_option("operation", args->positional_op,
                      "the collective, as nccom-test names it: all_reduce/allr, all_gather/allg, "
                      "reduce_scatter/redsct, alltoall, permute, sendrecv (and broadcast, reduce)");
  cmd->add_option("--op", args->op, "the collective, as an option (same names)")
      ->default_val("all-reduce")
      ->excludes(positional);
  cmd->add_option("--ranks,--nworkers,-r", args->ranks,
                  "number of ranks (NeuronCores), at most the instance's")
      ->default_val(2);
  cmd->add_option("--minbytes,-b", args->minbytes, "smallest size (1024, 1K, 64M, 1G)")
      ->default_val("1K");
  cmd->add_option("--maxbytes,-e", args->maxbytes, "largest size")->default_val("64M");
  auto* factor = cmd->add_option("--stepfactor,-f", args->stepfactor,
                                 "size multiplier between rows (at least 2)")
                     ->default_val(2);
  cmd->add_option("--stepbytes,-i", args->stepbytes,
                  "size added between rows, instead of --stepfactor")
      ->excludes(factor);
  cmd->add_option("--iters,-n", args->iters,
                  "iterations per size (nccom-test's; accepted: simulated time is the same each "
                  "time, so one is simulated)")
      ->default_val(20);
  cmd->add_option("--warmup_iters,--warmup-iters,-w", args->warmup_iters,
                  "warm-up iterations (accepted, as --iters)")
      ->default_val(5);
  cmd->add_flag("--show-algorithm", args->show_algorithm,
                "add the algorithm of each size as the last column");
  cmd->add_option("--report-to-json-file", args->report_json,
                  "write the results as nccom-test's JSON report");
  cmd->add_flag("--non-interactive,--debug", args->quiet_flags,
                "accepted for nccom-test's scripts (no effect)");
  cmd->add_option("--dtype,--datatype,-d", args->dtype,
                  "fp32, bf16, fp16, tf32, fp8e4, fp8e5, int8, uint8, int16, uint16, int32, uint32")
      ->default_val("fp32");
  cmd->add_option("--algorithm,-a", args->algorithm, "auto, ring, mesh, rdh, hier2d, hierarchical")
      ->default_val("auto");
  cmd->add_option("--instance", args->instance, "instance type")->default_val("trn2.48xlarge");
  cmd->add_option("--reduce-op,-o", args->reduce_op, "sum, prod, max, min, avg")
      ->default_val("sum");
  cmd->add_option("--placement", args->placement,
                  "packed (rank r on core r, as a launcher fills the instance) or one-per-chip "
                  "(every pair crosses "
                  "NeuronLink)")
      ->default_val("packed");
  cmd->add_option(
      "--mesh-below", args->mesh_below,
      "automatic choice: mesh below this size (default: the generation config's, 1 MB)");
  cmd->add_option("--rdh-below", args->rdh_below,
                  "automatic choice: recursive halving-doubling below this size, ring above "
                  "(default: the config's, 56 MB)");
  cmd->add_option("--runtime-release", args->runtime_release,
                  "the Neuron runtime release whose collective costs and algorithms to model "
                  "(spec/configs/runtime-releases.json; default: the newest; none: the fabric "
                  "model alone)");
  cmd->add_option("--root", args->root, "root rank of broadcast and reduce")->default_val(0);
  cmd->add_option("--lnc", args->lnc,
                  "physical cores per rank (logical NeuronCore size; trn2: 2 gives 4 ranks per "
                  "chip, each with both cores' DMA engines)")
      ->default_val(1);
  cmd->add_flag("--check,-c", args->check,
                "run with data and verify every rank's values (exit 1 on a mismatch)");
  cmd->add_flag("--timing-only", args->timing_only,
                "simulate time only, no data (for large sizes)");
  cmd->add_option("--metrics", args->metrics, "write metrics (JSON): time and bandwidths per size");
  cmd->add_option("--metrics-prefix", args->metrics_prefix,
                  "names in --metrics are PREFIX/<size>B/<metric> (default: cc_bench/<op>), e.g. "
                  "the benchmark's name in a history");
  cmd->add_flag("--processes", args->processes,
                "one process per rank, connected over TCP on loopback");
  cmd->add_option(
      "--rank", args->rank,
      "run only this rank of a job across processes (NEURON_RT_ROOT_COMM_ID: rank 0's host:port; "
      "NEURONSIM_JOB_TOKEN: the same secret on every rank)");
  cmd->add_option("--timeout", args->timeout,
                  "seconds a rank waits for the others before it gives up")
      ->default_val(60);
  cmd->callback([args] {
    if (args->processes)
      run_processes(*args);
    else
      cc_bench_command(*args);
  });
}

}  // namespace neuronsim::tools
