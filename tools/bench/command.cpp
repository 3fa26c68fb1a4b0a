// `neuron-sim bench`: the simulator's benchmark suite (bench/README.md).
//
// neuron-sim bench                                  print the tables
// neuron-sim bench --csv results.csv                also write benchmark,metric,value rows
// neuron-sim bench --check bench/expected_results.csv
//     the gate: exit 1 when a figure leaves its margin
// neuron-sim bench --update bench/expected_results.csv
//     rewrite the expected file, keeping margins
// neuron-sim bench --speed                          also measure the simulator's host speed
// neuron-sim bench --record history.db              append the run to the history (SQLite)
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "benchmarks.h"
#include "expected.h"
#include "history.h"
#include "neuronsim/spec/config.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
namespace bench = neuronsim::bench;

struct Args {
  std::string instance = "trn2.3xlarge";
  std::string csv, check, update;
  std::string default_margin = "0.01";
  std::string filter;
  bool speed = false;
  double speed_seconds = 0.3;
  bool quiet = false;
  std::string record, commit, machine;  // --record: the history, and what the run was
};

// The commit the run measured: --commit, else the checkout's (git rev-parse HEAD), else
// "unknown".
std::string current_commit(const std::string& given) {
  if (!given.empty()) return given;
  std::string out;
  if (FILE* p = ::popen("git rev-parse HEAD 2>/dev/null", "r")) {
    std::array<char, 128> buf{};
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

std::string host_name(const std::string& given) {
  if (!given.empty()) return given;
  std::array<char, 256> buf{};
  return ::gethostname(buf.data(), buf.size() - 1) == 0 ? buf.data() : "unknown";
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
}

int run(const Args& args) {
  if (!args.check.empty() && !args.update.empty())
    throw std::invalid_argument(
        "--check and --update exclude each other: update, review the diff, then check");
  if (!args.filter.empty() && (!args.check.empty() || !args.update.empty()))
    throw std::invalid_argument(
        "--filter cannot be combined with --check or --update (they cover the whole set)");
  const bench::Margin default_margin = bench::parse_margin(args.default_margin);

  bench::Platform platform;
  platform.instance = neuronsim::spec::load_instance(args.instance);
  platform.generation = neuronsim::spec::load_generation(platform.instance.generation);
  const bench::Selection selection{args.filter};

  // Read the expected file first, so that a malformed one fails before the runs.
  std::optional<bench::ExpectedFile> expected;
  if (!args.check.empty()) expected = bench::read_expected(args.check);
  if (!args.update.empty() && fs::exists(args.update)) expected = bench::read_expected(args.update);

  const auto start = std::chrono::steady_clock::now();
  const std::vector<bench::MicroResult> micro = bench::run_micro(platform, selection);
  const std::vector<bench::KernelResult> kernels = bench::run_kernels(platform, selection);
  const double host_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<bench::Measurement> results;
  for (const auto& r : micro) bench::append_measurements(r, results);
  for (const auto& r : kernels) bench::append_measurements(r, results);
  bool printed = false;  // whether a section was printed (sections are separated by a blank line)
  if (!args.quiet) {
    printed = true;
    const std::string a = bench::micro_table(micro, platform),
                      b = bench::kernel_table(kernels, platform);
    fmt::print("{}{}{}", a, !a.empty() && !b.empty() ? "\n" : "", b);
    fmt::print("({} figures; simulated on this host in {:.2f} s)\n", results.size(), host_s);
  }
  if (results.empty() && !args.filter.empty())
    throw std::invalid_argument(fmt::format("--filter '{}' selects no benchmark", args.filter));

  if (!args.csv.empty()) write_file(args.csv, bench::results_csv(results));
  if (!args.record.empty()) {
    const bench::RunInfo info{current_commit(args.commit), utc_now(), host_name(args.machine),
                              "neuron-sim bench"};
    const int64_t id = bench::record_run(args.record, info, results);
    fmt::print("{}recorded run {} ({} figures, commit {}) in {}\n", args.quiet ? "" : "\n", id,
               results.size(), info.commit, args.record);
  }

  int status = 0;
  if (!args.update.empty()) {
    bench::UpdateSummary sum;
    write_file(args.update, bench::updated_expected(expected, results, default_margin, &sum));
    fmt::print(
        "{}updated {}: {} rows; {} kept their margin ({} with a new value), {} added with margin "
        "{}, "
        "{} removed\n",
        printed ? "\n" : "", args.update, results.size(), sum.kept, sum.changed, sum.added.size(),
        default_margin.text(), sum.removed.size());
    for (const bench::ExpectedRow& r : sum.removed)
      fmt::print("  removed: {} {}\n", r.benchmark, r.metric);
    fmt::print("Commit the new file together with the reason for the change (bench/README.md).\n");
    printed = true;
  }
  if (expected && !args.check.empty()) {
    const bench::CheckReport report = bench::check(*expected, results);
    fmt::print("{}Checking against {}:\n{}", printed ? "\n" : "", args.check,
               bench::format_report(report));
    printed = true;
    if (!report.ok()) status = 1;
  }
  if (args.speed) {
    std::fflush(stdout);
    fmt::print("{}{}", printed ? "\n" : "", bench::run_speed(platform, args.speed_seconds));
  }
  return status;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Benchmarks: the simulated engines, DMA and HBM against their theoretical rates, the example "
      "kernels' simulated results, an expected-results gate, and the simulator's host speed");
  cmd->add_option("--instance", args->instance,
                  "instance type to simulate (its generation sets the figures)")
      ->capture_default_str();
  cmd->add_option("--csv", args->csv,
                  "write the results as CSV rows benchmark,metric,value to FILE");
  cmd->add_option(
      "--check", args->check,
      "compare with an expected file (benchmark,metric,value,margin); exit 1 on any failure");
  cmd->add_option("--update", args->update,
                  "rewrite an expected file from this run, keeping existing margins (commit it "
                  "with the reason)");
  cmd->add_option("--default-margin", args->default_margin,
                  "margin of rows --update adds: relative (0.01) or absolute (abs:5)")
      ->capture_default_str();
  cmd->add_option("--filter", args->filter, "run only the benchmarks whose name contains TEXT");
  cmd->add_flag("--speed", args->speed,
                "also measure the simulator's host speed (machine dependent, never gated)");
  cmd->add_option("--speed-seconds", args->speed_seconds, "host seconds per speed figure")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("-q,--quiet", args->quiet, "do not print the result tables");
  cmd->add_option("--record", args->record,
                  "append the run to a history database (SQLite; created when new)");
  cmd->add_option("--commit", args->commit,
                  "the commit the run measured (default: git rev-parse HEAD)");
  cmd->add_option("--machine", args->machine, "the machine's name (default: the host name)");
  cmd->callback([args] {
    if (const int status = run(*args); status != 0) {
      std::fflush(stdout);
      throw CLI::RuntimeError(status);  // the gate failed: its report is printed
    }
  });
}

}  // namespace neuronsim::bench
