// `neuron-sim cc-bench`: a collective benchmark in the style of nccom-test, on the in-process
// collectives runner (every rank in this process, on the simulated fabric). For each message
// size it prints the simulated time, the algorithm bandwidth and the bus bandwidth; --check
// runs with data and verifies every rank's output against a reference computed here.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "neuronsim/cc/algorithms.h"
#include "neuronsim/cc/runner.h"
#include "neuronsim/isa/dtype.h"
#include "neuronsim/sim/config.h"

namespace neuronsim::tools {
namespace {

using cc::Algorithm;
using cc::Op;
using cc::ReduceOp;
using isa::DType;

struct CcBenchArgs {
  std::string op = "all-reduce";
  int ranks = 2;
  std::string minbytes = "1K", maxbytes = "64M";
  uint64_t stepfactor = 2;
  std::string dtype = "fp32";
  std::string algorithm = "auto";
  std::string instance = "trn2.48xlarge";
  std::string reduce_op = "sum";
  std::string placement = "packed";
  int root = 0;
  bool check = false, timing_only = false;
  std::string metrics;
  std::string processes, rank, timeout;  // the multi-process transport: not yet supported
};

// "1024", "1K", "64M", "1G", "2T" (binary multiples; "KB"/"KiB" etc. accepted too).
uint64_t parse_size(const std::string& option, const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::string suffix = text.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() >= 2 && suffix.substr(suffix.size() - 2) == "IB") suffix.resize(suffix.size() - 2);
  else if (suffix.size() >= 2 && suffix.back() == 'B') suffix.pop_back();
  else if (suffix == "B") suffix.clear();
  int shift = -1;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  if (i == 0 || shift < 0 || i > 15)
    throw std::runtime_error(fmt::format("{} '{}': expected a size such as 1024, 1K, 64M or 1G", option, text));
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
  if (s == "all-reduce" || s == "allreduce") return {Op::all_reduce};
  if (s == "all-gather" || s == "allgather") return {Op::all_gather};
  if (s == "reduce-scatter" || s == "reducescatter") return {Op::reduce_scatter};
  if (s == "all-to-all" || s == "alltoall") return {Op::all_to_all};
  if (s == "broadcast") return {Op::broadcast};
  if (s == "reduce") return {Op::reduce};
  if (s == "permute") return {Op::permute};
  if (s == "send-recv" || s == "sendrecv") return {Op::permute, true};
  throw std::runtime_error(fmt::format("--op '{}': unknown operation (known: all-reduce, all-gather, reduce-scatter, "
                                       "all-to-all, broadcast, reduce, permute, send-recv)", text));
}

DType parse_dtype_arg(const std::string& text) {
  const std::string s = normalize(text);
  struct Name {
    const char* name;
    DType t;
  };
  static const Name names[] = {
      {"fp32", DType::fp32},     {"float32", DType::fp32},    {"bf16", DType::bf16},         {"bfloat16", DType::bf16},
      {"fp16", DType::fp16},     {"float16", DType::fp16},    {"tf32", DType::tf32},         {"fp8e4", DType::fp8_e4m3},
      {"fp8-e4m3", DType::fp8_e4m3}, {"fp8e5", DType::fp8_e5m2}, {"fp8-e5m2", DType::fp8_e5m2}, {"int8", DType::int8},
      {"uint8", DType::uint8},   {"int16", DType::int16},     {"uint16", DType::uint16},     {"int32", DType::int32},
      {"uint32", DType::uint32},
  };
  for (const Name& n : names)
    if (s == n.name) return n.t;
  throw std::runtime_error(fmt::format("--dtype '{}': unknown data type (known: fp32, bf16, fp16, tf32, fp8e4, fp8e5, "
                                       "int8, uint8, int16, uint16, int32, uint32)", text));
}

Algorithm parse_algorithm(const std::string& text) {
  const std::string s = normalize(text);
  if (s == "auto") return Algorithm::auto_select;
  if (s == "ring") return Algorithm::ring;
  if (s == "mesh") return Algorithm::mesh;
  if (s == "rdh") return Algorithm::rdh;
  if (s == "hier2d") return Algorithm::hier2d;
  throw std::runtime_error(fmt::format("--algorithm '{}': unknown algorithm (known: auto, ring, mesh, rdh, hier2d)", text));
}

ReduceOp parse_reduce_op(const std::string& text) {
  const std::string s = normalize(text);
  if (s == "sum") return ReduceOp::sum;
  if (s == "prod") return ReduceOp::prod;
  if (s == "max") return ReduceOp::max;
  if (s == "min") return ReduceOp::min;
  if (s == "avg") return ReduceOp::avg;
  throw std::runtime_error(fmt::format("--reduce-op '{}': unknown reduction (known: sum, prod, max, min, avg)", text));
}

bool reduces(Op op) { return op == Op::all_reduce || op == Op::reduce_scatter || op == Op::reduce; }
// Operations whose size is the whole of R blocks (nccl-tests: the larger of input and output).
bool blocked(Op op) { return op == Op::all_gather || op == Op::reduce_scatter || op == Op::all_to_all; }

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
    if (unit) x = (fp || isa::is_signed_int(spec.dtype)) ? (coin(rng) ? 1.0f : -1.0f) : 1.0f;
    else x = fp ? real(rng) : static_cast<float>(small(rng));
  }
  std::vector<uint8_t> out(n * es);
  isa::convert_from_float(spec.dtype, v.data(), out.data(), n);
  return out;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::fp32: return std::ldexp(1.0, -23);
    case DType::tf32: return std::ldexp(1.0, -10);
    case DType::bf16: return std::ldexp(1.0, -7);
    case DType::fp16: return std::ldexp(1.0, -10);
    case DType::fp8_e4m3: return std::ldexp(1.0, -3);
    case DType::fp8_e5m2: return std::ldexp(1.0, -2);
    default: return 0.0;
  }
}
// The smallest spacing near zero (subnormals), for an absolute floor on the error.
double tiny_spacing(DType t) {
  switch (t) {
    case DType::fp32: return std::ldexp(1.0, -126);
    case DType::tf32: return std::ldexp(1.0, -126);
    case DType::bf16: return std::ldexp(1.0, -126);
    case DType::fp16: return std::ldexp(1.0, -24);
    case DType::fp8_e4m3: return std::ldexp(1.0, -9);
    case DType::fp8_e5m2: return std::ldexp(1.0, -16);
    default: return 0.0;
  }
}

struct Expected {
  double value = 0, scale = 0;  // scale: the magnitude the rounding error is relative to
};

// Element i of the reduction of element `at` over the ranks' inputs.
Expected combine(const cc::CollectiveSpec& spec, const std::vector<std::vector<float>>& in, uint64_t at, int ranks) {
  Expected e;
  double v = in[0][at], mag = std::fabs(v);
  for (int r = 1; r < ranks; ++r) {
    const double x = in[static_cast<size_t>(r)][at];
    switch (spec.reduce) {
      case ReduceOp::sum:
      case ReduceOp::avg: v += x; mag += std::fabs(x); break;
      case ReduceOp::prod: v *= x; mag *= std::fabs(x); break;
      case ReduceOp::max: v = std::max(v, x); break;
      case ReduceOp::min: v = std::min(v, x); break;
    }
  }
  if (spec.reduce == ReduceOp::avg) {
    v /= ranks;
    mag /= ranks;
  }
  if (!isa::is_float(spec.dtype)) {  // integer arithmetic saturates to the type (inputs are non-negative)
    uint8_t buf[8] = {};
    isa::store_from_float(spec.dtype, static_cast<float>(v), buf);
    const double stored = isa::load_as_float(spec.dtype, buf);
    if (spec.reduce != ReduceOp::avg) v = stored;
  }
  e.value = v;
  e.scale = mag;
  return e;
}

// How many elements of rank outputs differ from the reference.
uint64_t count_errors(const cc::CollectiveSpec& spec, int ranks, const std::vector<std::vector<uint8_t>>& inputs,
                      const std::vector<std::vector<uint8_t>>& outputs) {
  const size_t es = isa::dtype_size(spec.dtype);
  const uint64_t C = spec.count;
  std::vector<std::vector<float>> in(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    in[static_cast<size_t>(r)].resize(inputs[static_cast<size_t>(r)].size() / es);
    isa::convert_to_float(spec.dtype, inputs[static_cast<size_t>(r)].data(), in[static_cast<size_t>(r)].data(),
                          in[static_cast<size_t>(r)].size());
  }
  const double u = unit_roundoff(spec.dtype), tiny = tiny_spacing(spec.dtype);
  uint64_t errors = 0;
  auto compare_bytes = [&](const std::vector<uint8_t>& got, const uint8_t* want, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i)
      if (std::memcmp(got.data() + i * es, want + i * es, es) != 0) ++errors;
  };
  for (int r = 0; r < ranks; ++r) {
    const std::vector<uint8_t>& got = outputs[static_cast<size_t>(r)];
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
          compare_bytes(std::vector<uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(C * es * j),
                                             got.begin() + static_cast<std::ptrdiff_t>(C * es * (j + 1))),
                        inputs[static_cast<size_t>(j)].data(), C);
        break;
      case Op::all_to_all:
        for (int j = 0; j < ranks; ++j)
          compare_bytes(std::vector<uint8_t>(got.begin() + static_cast<std::ptrdiff_t>(C * es * j),
                                             got.begin() + static_cast<std::ptrdiff_t>(C * es * (j + 1))),
                        inputs[static_cast<size_t>(j)].data() + C * es * static_cast<uint64_t>(r), C);
        break;
      case Op::broadcast: compare_bytes(got, inputs[static_cast<size_t>(spec.root)].data(), C); break;
      case Op::permute: {
        if (got.empty()) break;
        int src = -1;
        for (int s = 0; s < ranks; ++s)
          if (spec.peers[static_cast<size_t>(s)] == r) src = s;
        if (src < 0) errors += got.size() / es;
        else compare_bytes(got, inputs[static_cast<size_t>(src)].data(), C);
        break;
      }
      default: break;
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

void cc_bench_command(const CcBenchArgs& args) {
  if (!args.processes.empty() || !args.rank.empty() || !args.timeout.empty())
    throw std::runtime_error(
        "--processes, --rank and --timeout: the multi-process transport is not yet supported "
        "(cc-bench runs every rank in this process)");
  if (args.check && args.timing_only)
    throw std::runtime_error("--check needs data: it cannot be combined with --timing-only");
  const OpChoice choice = parse_op(args.op);
  const DType dtype = parse_dtype_arg(args.dtype);
  const Algorithm algorithm = parse_algorithm(args.algorithm);
  const ReduceOp reduce = parse_reduce_op(args.reduce_op);
  const sim::InstanceConfig inst = sim::load_instance(args.instance);
  const int R = args.ranks;
  if (R < 2) throw std::runtime_error(fmt::format("--ranks {}: a collective needs at least 2 ranks", R));
  if (static_cast<uint64_t>(R) > inst.total_cores())
    throw std::runtime_error(fmt::format("--ranks {}: {} has only {} NeuronCores ({} chips x {})", R, inst.name,
                                         inst.total_cores(), inst.chips, inst.cores_per_chip));
  const uint64_t minbytes = parse_size("--minbytes", args.minbytes);
  const uint64_t maxbytes = parse_size("--maxbytes", args.maxbytes);
  if (minbytes == 0) throw std::runtime_error("--minbytes must be at least 1");
  if (minbytes > maxbytes)
    throw std::runtime_error(fmt::format("--minbytes {} is larger than --maxbytes {}", args.minbytes, args.maxbytes));
  if (args.stepfactor < 2) throw std::runtime_error(fmt::format("--stepfactor {}: must be at least 2", args.stepfactor));
  if (args.root < 0 || args.root >= R)
    throw std::runtime_error(fmt::format("--root {}: must be a rank, 0 to {}", args.root, R - 1));
  if (algorithm != Algorithm::auto_select && !cc::algorithm_supported(choice.op, algorithm, R)) {
    std::string why;
    if (algorithm == Algorithm::rdh && (R & (R - 1)) != 0) why = fmt::format(" (rdh needs a power-of-two rank count, not {})", R);
    else if (algorithm == Algorithm::hier2d) why = " (hier2d is all-reduce only, on a multiple of 4 ranks, at least 8)";
    else if (choice.op == Op::all_to_all || choice.op == Op::permute) why = " (this operation is mesh only)";
    throw std::runtime_error(fmt::format("--algorithm {} is not available for {} on {} ranks{}",
                                         cc::algorithm_name(algorithm), args.op, R, why));
  }

  const size_t es = isa::dtype_size(dtype);
  cc::RunOptions options;
  options.algorithm = algorithm;
  const std::string placement = normalize(args.placement);
  if (placement == "packed") options.placement = cc::Placement::packed;
  else if (placement == "one-per-chip") options.placement = cc::Placement::one_per_chip;
  else throw std::runtime_error(fmt::format("--placement '{}': expected packed or one-per-chip", args.placement));
  if (options.placement == cc::Placement::one_per_chip && static_cast<uint64_t>(R) > inst.chips)
    throw std::runtime_error(fmt::format("--ranks {} --placement one-per-chip: {} has only {} chips", R, inst.name, inst.chips));
  const std::string op_label = choice.send_recv ? "send_recv" : std::string(cc::op_name(choice.op));
  const bool with_data = !args.timing_only;

  fmt::print("# cc-bench: {} on {} ranks of {} ({} chips x {} cores, placement {}), {}{}, algorithm {}, {}\n", op_label,
             R, inst.name, inst.chips, inst.cores_per_chip, placement, isa::dtype_name(dtype),
             reduces(choice.op) ? fmt::format(", reduce {}", cc::reduce_op_name(reduce)) : std::string(),
             cc::algorithm_name(algorithm),
             args.timing_only ? "timing only" : args.check ? "with data, checked" : "with data");
  const std::string header = fmt::format("{:>14} {:>13} {:>9} {:>8} {:>12} {:>12} {:>12}{}", "size(B)", "count(elems)",
                                         "type", "algo", "time(us)", "algbw(GiB/s)", "busbw(GiB/s)",
                                         args.check ? fmt::format(" {:>8}", "#wrong") : std::string());
  fmt::print("{}\n", header);
  std::fflush(stdout);

  std::vector<Row> rows;
  uint64_t failed_sizes = 0;
  for (uint64_t size = minbytes; size <= maxbytes;) {
    cc::CollectiveSpec spec;
    spec.op = choice.op;
    spec.reduce = reduce;
    spec.dtype = dtype;
    spec.root = args.root;
    // The size is the larger of one rank's input and output, as nccl-tests and nccom-test count it.
    const uint64_t elems = size / es;
    spec.count = blocked(choice.op) ? elems / static_cast<uint64_t>(R) : elems;
    if (choice.op == Op::permute) {
      if (choice.send_recv) spec = cc::send_recv_spec(R, 0, R - 1, dtype, spec.count);
      else {
        spec.peers.resize(static_cast<size_t>(R));
        for (int r = 0; r < R; ++r) spec.peers[static_cast<size_t>(r)] = (r + 1) % R;
      }
    }
    const uint64_t next = size > maxbytes / args.stepfactor ? maxbytes + 1 : size * args.stepfactor;
    if (spec.count == 0) {
      size = next;
      continue;  // smaller than one element per block
    }
    Row row;
    row.count = blocked(choice.op) ? spec.count * static_cast<uint64_t>(R) : spec.count;
    row.bytes = row.count * es;
    cc::CollectiveResult result;
    if (with_data) {
      std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(R));
      for (int r = 0; r < R; ++r) inputs[static_cast<size_t>(r)] = make_input(spec, R, r);
      result = cc::run_collective(inst, R, spec, inputs, options);
      // Test hook: NEURONSIM_CC_BENCH_CORRUPT=1 flips a bit of the last rank's output, so that
      // the tests can see --check catch a wrong value and exit 1.
      if (const char* corrupt = std::getenv("NEURONSIM_CC_BENCH_CORRUPT"); corrupt && std::string(corrupt) == "1")
        if (!result.outputs.empty() && !result.outputs.back().empty()) result.outputs.back()[es - 1] ^= 0x40;
      if (args.check) {
        row.errors = count_errors(spec, R, inputs, result.outputs);
        if (*row.errors) ++failed_sizes;
      }
    } else {
      result = cc::time_collective(inst, R, spec, options);
    }
    row.algorithm = result.algorithm;
    const double seconds = result.seconds();
    row.time_us = seconds * 1e6;
    row.algbw = seconds > 0 ? static_cast<double>(row.bytes) / seconds / double(1ull << 30) : 0.0;
    row.busbw = row.algbw * cc::bus_bandwidth_factor(choice.op, R);
    fmt::print("{:>14} {:>13} {:>9} {:>8} {:>12.3f} {:>12.3f} {:>12.3f}{}\n", row.bytes, row.count,
               isa::dtype_name(dtype), cc::algorithm_name(row.algorithm), row.time_us, row.algbw, row.busbw,
               row.errors ? fmt::format(" {:>8}", *row.errors) : std::string());
    std::fflush(stdout);
    rows.push_back(row);
    size = next;
  }
  if (rows.empty())
    throw std::runtime_error(fmt::format("no size from --minbytes {} to --maxbytes {} holds one {} element{}",
                                         args.minbytes, args.maxbytes, isa::dtype_name(dtype),
                                         blocked(choice.op) ? " per rank" : ""));
  double busbw_sum = 0;
  for (const Row& r : rows) busbw_sum += r.busbw;
  fmt::print("# avg busbw: {:.3f} GiB/s over {} sizes\n", busbw_sum / static_cast<double>(rows.size()), rows.size());

  if (!args.metrics.empty()) {
    nlohmann::json metrics = nlohmann::json::array(), results = nlohmann::json::array();
    for (const Row& r : rows) {
      const std::string prefix = fmt::format("cc_bench/{}/{}B", op_label, r.bytes);
      metrics.push_back({{"name", prefix + "/time_us"}, {"unit", "us"}, {"value", r.time_us}});
      metrics.push_back({{"name", prefix + "/algbw"}, {"unit", "GiB/s"}, {"value", r.algbw}});
      metrics.push_back({{"name", prefix + "/busbw"}, {"unit", "GiB/s"}, {"value", r.busbw}});
      nlohmann::json rec = {{"size_bytes", r.bytes}, {"count", r.count},         {"dtype", isa::dtype_name(dtype)},
                            {"algorithm", cc::algorithm_name(r.algorithm)},     {"time_us", r.time_us},
                            {"algbw_gib_per_s", r.algbw},                       {"busbw_gib_per_s", r.busbw}};
      if (r.errors) rec["errors"] = *r.errors;
      results.push_back(rec);
    }
    nlohmann::json doc = {
        {"metrics", metrics},
        {"details",
         {{"op", op_label},
          {"ranks", R},
          {"instance", inst.name},
          {"dtype", isa::dtype_name(dtype)},
          {"reduce_op", cc::reduce_op_name(reduce)},
          {"algorithm", cc::algorithm_name(algorithm)},
          {"placement", placement},
          {"timing_only", args.timing_only},
          {"bus_bandwidth_factor", cc::bus_bandwidth_factor(choice.op, R)},
          {"results", results}}}};
    std::ofstream out(args.metrics);
    out << doc.dump(2) << "\n";
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write", args.metrics));
    fmt::print("# metrics written to {}\n", args.metrics);
  }
  if (failed_sizes)
    throw std::runtime_error(fmt::format("cc-bench --check: {} of {} sizes had wrong values", failed_sizes, rows.size()));
}

}  // namespace

void add_cc_bench_command(CLI::App& app) {
  auto args = std::make_shared<CcBenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cc-bench", "Benchmark a collective on the simulated fabric (nccom-test style): time, algbw and busbw per size");
  cmd->add_option("--op", args->op,
                  "all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce, permute, send-recv")
      ->default_val("all-reduce");
  cmd->add_option("--ranks,-r", args->ranks, "number of ranks (NeuronCores), at most the instance's")->default_val(2);
  cmd->add_option("--minbytes,-b", args->minbytes, "smallest size (1024, 1K, 64M, 1G)")->default_val("1K");
  cmd->add_option("--maxbytes,-e", args->maxbytes, "largest size")->default_val("64M");
  cmd->add_option("--stepfactor,-f", args->stepfactor, "size multiplier between rows (at least 2)")->default_val(2);
  cmd->add_option("--dtype,-d", args->dtype, "fp32, bf16, fp16, tf32, fp8e4, fp8e5, int8, uint8, int16, uint16, int32, uint32")
      ->default_val("fp32");
  cmd->add_option("--algorithm,-a", args->algorithm, "auto, ring, mesh, rdh, hier2d")->default_val("auto");
  cmd->add_option("--instance", args->instance, "instance type")->default_val("trn2.48xlarge");
  cmd->add_option("--reduce-op,-o", args->reduce_op, "sum, prod, max, min, avg")->default_val("sum");
  cmd->add_option("--placement", args->placement,
                  "packed (rank r on core r, as a launcher fills the instance) or one-per-chip (every pair crosses "
                  "NeuronLink)")
      ->default_val("packed");
  cmd->add_option("--root", args->root, "root rank of broadcast and reduce")->default_val(0);
  cmd->add_flag("--check,-c", args->check, "run with data and verify every rank's values (exit 1 on a mismatch)");
  cmd->add_flag("--timing-only", args->timing_only, "simulate time only, no data (for large sizes)");
  cmd->add_option("--metrics", args->metrics, "write metrics (JSON): time and bandwidths per size");
  cmd->add_option("--processes", args->processes, "multi-process runs: not yet supported");
  cmd->add_option("--rank", args->rank, "multi-process runs: not yet supported");
  cmd->add_option("--timeout", args->timeout, "multi-process runs: not yet supported");
  cmd->callback([args] { cc_bench_command(*args); });
}

}  // namespace neuronsim::tools
