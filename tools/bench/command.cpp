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
// neuron-sim bench --suite bench/suite.json         the suite above the kernel level instead
// neuron-sim bench --import metrics.json ...        figures of earlier runs instead
// neuron-sim bench --check-history history.db       the gate against the history's latest values
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
#include "gate.h"
#include "history.h"
#include "imports.h"
#include "neuronsim/spec/config.h"
#include "suite.h"

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
  std::string record, commit, machine;   // --record: the history, and what the run was
  std::string suite;                     // run bench/suite.json instead of the built-in set
  std::vector<std::string> skip_labels;  // suite entries not to run
  std::vector<std::string> imports;      // read these files' figures instead of running
  std::string import_benchmark;          // the benchmark of imported names without "/"
  std::string check_history;             // the gate against a history
  std::string history_margin = "1e-06";
};

// This executable, and the tools built beside it.
bench::SuiteTools suite_tools(const fs::path& root) {
  bench::SuiteTools t;
  t.neuron_sim = fs::read_symlink("/proc/self/exe");
  t.make_kernels = t.neuron_sim.parent_path() / "neuronsim-make-kernels";
  const fs::path venv = root / ".venv" / "bin" / "python";
  t.python = fs::exists(venv) ? venv : fs::path("python3");
  return t;
}

// The figures of this run: from files (--import), the suite (--suite) or the built-in
// benchmarks, whose tables are printed unless --quiet. Returns the source recorded with them.
std::string gather(const Args& args, const bench::Platform& platform,
                   std::vector<bench::Measurement>& results,
                   std::vector<bench::Artifact>& artifacts, bool& printed) {
  if (!args.imports.empty()) {
    for (const std::string& file : args.imports) {
      const auto figures = bench::read_figures(file, args.import_benchmark);
      results.insert(results.end(), figures.begin(), figures.end());
      fmt::print("imported {} figures from {}\n", figures.size(), file);
    }
    printed = true;
    return "neuron-sim bench --import";
  }
  if (!args.suite.empty()) {
    const bench::Suite suite = bench::read_suite(args.suite);
    const auto start = std::chrono::steady_clock::now();
    bench::SuiteResult r = bench::run_suite(suite, {args.filter, args.skip_labels},
                                            suite_tools(suite.root), [](const std::string& line) {
                                              fmt::print("{}\n", line);
                                              std::fflush(stdout);
                                            });
    fmt::print("({} figures from {} in {:.1f} s)\n", r.figures.size(), args.suite,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    results = std::move(r.figures);
    artifacts = std::move(r.artifacts);
    printed = true;
    return "neuron-sim bench --suite " + args.suite;
  }
  const bench::Selection selection{args.filter};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<bench::MicroResult> micro = bench::run_micro(platform, selection);
  const std::vector<bench::KernelResult> kernels = bench::run_kernels(platform, selection);
  const double host_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& r : micro) bench::append_measurements(r, results);
  for (const auto& r : kernels) bench::append_measurements(r, results);
  if (!args.quiet) {
    printed = true;
    const std::string a = bench::micro_table(micro, platform),
                      b = bench::kernel_table(kernels, platform);
    fmt::print("{}{}{}", a, !a.empty() && !b.empty() ? "\n" : "", b);
    fmt::print("({} figures; simulated on this host in {:.2f} s)\n", results.size(), host_s);
  }
  if (results.empty() && !args.filter.empty())
    throw std::invalid_argument(fmt::format("--filter '{}' selects no benchmark", args.filter));
  return "neuron-sim bench";
}

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

  if (!args.imports.empty() && !args.suite.empty())
    throw std::invalid_argument("--import and --suite exclude each other");
  const bench::Margin history_margin = bench::parse_margin(args.history_margin);

  bench::Platform platform;
  platform.instance = neuronsim::spec::load_instance(args.instance);
  platform.generation = neuronsim::spec::load_generation(platform.instance.generation);

  // Read the expected file and the history first, so that a malformed one fails before the
  // runs, and the history gate compares with what was there before this run is recorded.
  std::optional<bench::ExpectedFile> expected;
  if (!args.check.empty()) expected = bench::read_expected(args.check);
  if (!args.update.empty() && fs::exists(args.update)) expected = bench::read_expected(args.update);
  const std::string history_file = !args.check_history.empty() ? args.check_history : args.record;
  std::map<bench::FigureKey, bench::Series> history;
  // A history that does not exist yet has no figure: the first run of a new one is all new.
  if (!history_file.empty() && fs::exists(history_file))
    history = bench::series_of(bench::read_history(history_file));

  std::vector<bench::Measurement> results;
  std::vector<bench::Artifact> artifacts;
  bool printed = false;  // whether a section was printed (sections are separated by a blank line)
  const std::string source = gather(args, platform, results, artifacts, printed);

  if (!args.csv.empty()) write_file(args.csv, bench::results_csv(results));
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
    // Where the history knows a failed figure, say which commit last changed it.
    for (const bench::RowOutcome& r : report.rows)
      if (r.status != bench::RowOutcome::Status::pass)
        if (const std::string note = bench::history_note(history, r.expected.benchmark,
                                                         r.expected.metric, r.expected.margin);
            !note.empty())
          fmt::print("  {} {}: {} ({})\n", r.expected.benchmark, r.expected.metric, note,
                     history_file);
    printed = true;
    if (!report.ok()) status = 1;
  }
  if (!args.check_history.empty()) {
    const bench::HistoryGateReport report = bench::check_against_history(
        history, results, expected ? &*expected : nullptr, history_margin);
    fmt::print("{}Checking against the history {}:\n{}", printed ? "\n" : "", args.check_history,
               bench::format_history_report(report));
    printed = true;
    if (!report.ok()) status = 1;
  }
  // Recorded whatever the gates said: the history keeps regressions too, for the report.
  if (!args.record.empty()) {
    const bench::RunInfo info{current_commit(args.commit), utc_now(), host_name(args.machine),
                              source};
    const int64_t id = bench::record_run(args.record, info, results, artifacts);
    fmt::print("{}recorded run {} ({} figures, {} artifacts, commit {}) in {}\n",
               printed ? "\n" : "", id, results.size(), artifacts.size(), info.commit, args.record);
    printed = true;
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
  cmd->add_option("--suite", args->suite,
                  "run the benchmark suite of FILE (bench/suite.json) instead of the built-in "
                  "kernel-level set; --filter selects its entries by name");
  cmd->add_option("--skip-label", args->skip_labels,
                  "with --suite: skip the benchmarks carrying this label (repeatable)");
  cmd->add_option("--import", args->imports,
                  "take the figures of these files instead of running: metrics JSON of "
                  "`run`/`cc-bench --metrics`, or CSV of --csv")
      ->expected(1, -1);
  cmd->add_option("--benchmark", args->import_benchmark,
                  "with --import: the benchmark of metric names that carry none");
  cmd->add_option("--check-history", args->check_history,
                  "compare every figure with its latest value in a history; exit 1 when one "
                  "moved, naming the commit that last changed it");
  cmd->add_option("--history-margin", args->history_margin,
                  "margin of --check-history for figures the --check file does not list")
      ->capture_default_str();
  cmd->callback([args] {
    if (const int status = run(*args); status != 0) {
      std::fflush(stdout);
      throw CLI::RuntimeError(status);  // the gate failed: its report is printed
    }
  });
}

}  // namespace neuronsim::bench
