// `neuron-sim correlate cases.csv`: simulated against measured figures (correlate.h).
#include <fmt/ranges.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "correlate.h"
#include "fit.h"
#include "report.h"
#include "shell.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;

struct CorrelateArgs {
  std::string cases, plot, chartjs, group, figures, configs = "spec/configs";
  double max_error = 0;  // percent; 0: no gate
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> fit;
  bool write = false;
};

// Every case simulated, `jobs` at a time: each is a process of its own in a scratch folder of
// its own, so they run side by side; the results keep the cases' order, and the first failure
// (in the cases' order of starting) is the one thrown, after the running ones have ended.
std::vector<CaseResult> simulate_all(const std::vector<CorrelationCase>& cases, const fs::path& dir,
                                     const fs::path& scratch, const fs::path& configs,
                                     unsigned jobs) {
  const fs::path neuron_sim = fs::read_symlink("/proc/self/exe");
  std::vector<double> simulated(cases.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr failed;
  const auto work = [&] {
    for (size_t i; (i = next++) < cases.size();) {
      {
        std::lock_guard lock(mu);
        if (failed) return;
      }
      try {
        simulated[i] =
            simulate_case(cases[i], dir, neuron_sim, scratch / std::to_string(i), configs);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!failed) failed = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> workers;
  const size_t count = std::max<size_t>(1, std::min<size_t>(jobs, cases.size()));
  for (size_t j = 0; j < count; ++j) workers.emplace_back(work);
  for (std::thread& w : workers) w.join();
  if (failed) std::rethrow_exception(failed);
  std::vector<CaseResult> results;
  for (size_t i = 0; i < cases.size(); ++i) results.push_back({cases[i], simulated[i]});
  return results;
}

// The set's figures for the dashboard: per group and for all, MAPE and the number of cases.
void write_figures(const std::string& file, const std::string& set,
                   const std::vector<GroupStats>& stats) {
  std::ofstream out(file, std::ios::binary);
  out << "benchmark,metric,value\n";
  for (const GroupStats& s : stats) {
    out << fmt::format("correlation/{}/{},mape_percent,{:.4f}\n", set, s.group, s.mape_percent);
    out << fmt::format("correlation/{}/{},cases,{}\n", set, s.group, s.n);
  }
  if (!out) throw CorrelationError(fmt::format("{}: cannot write", file));
}

std::string fitted_source(const std::string& cases, const FitResult& r, size_t i, size_t points) {
  return fmt::format(
      "fitted on {} ({} points by neuron-sim correlate --fit: MAPE {:.1f}% at {:.4g} before, "
      "{:.1f}% at this value; the set's MAPE stays within {:.0f} points of that for "
      "{:.4g}..{:.4g})",
      cases, points, r.mape_before, r.before[i], r.mape_after, kBandPoints, r.bands[i].first,
      r.bands[i].second);
}

void run_fit(const CorrelateArgs& args, const std::vector<CorrelationCase>& cases,
             const fs::path& dir, const fs::path& scratch) {
  // The evaluations start from a copy, so that an edit of the configurations during a long fit
  // does not reach it.
  const fs::path base = scratch / "configs";
  write_configs(args.configs, base, {}, {});
  std::vector<FreeFigure> figures;
  std::vector<double> start;
  for (const std::string& text : args.fit) {
    figures.push_back(parse_free_figure(text));
    start.push_back(figure_value(args.configs, figures.back()));
  }
  size_t evaluation = 0;
  const auto evaluate = [&](const std::vector<double>& values) {
    const fs::path configs = scratch / fmt::format("configs-{}", evaluation++);
    write_configs(base, configs, figures, values);
    std::vector<CaseResult> results =
        simulate_all(cases, dir, scratch / "cases", configs, args.jobs);
    fs::remove_all(configs);
    fmt::print(stderr, "  [{}] {} -> MAPE {:.2f}%\n", evaluation, fmt::join(values, ", "),
               mape_percent(results));
    return results;
  };
  const FitResult r = fit_figures(figures, start, evaluate);
  fmt::print("before the fit:\n{}\n",
             format_correlation(r.cases_before, group_stats(r.cases_before)));
  fmt::print("after the fit:\n{}\n", format_correlation(r.cases_after, group_stats(r.cases_after)));
  fmt::print("{:<48} {:>12} {:>12} {:>24}\n", "figure", "before", "fitted",
             fmt::format("band (MAPE +{:.0f} points)", kBandPoints));
  for (size_t i = 0; i < figures.size(); ++i)
    fmt::print("{:<48} {:>12.4g} {:>12.4g} {:>24}\n", figures[i].name(), r.before[i], r.after[i],
               fmt::format("{:.4g}..{:.4g}", r.bands[i].first, r.bands[i].second));
  fmt::print("MAPE {:.2f}% -> {:.2f}% in {} evaluations\n", r.mape_before, r.mape_after,
             r.evaluations);
  if (!args.write) return;
  for (size_t i = 0; i < figures.size(); ++i) {
    const fs::path file = fs::path(args.configs) / figures[i].file;
    const double value = std::stod(fmt::format("{:.4g}", r.after[i]));
    const std::string text =
        replace_figure(read_text(file), figures[i].pointer, value,
                       fitted_source(args.cases, r, i, cases.size()), file.string());
    std::ofstream out(file, std::ios::binary);
    out << text;
    if (!out) throw CorrelationError(fmt::format("{}: cannot write", file.string()));
    fmt::print("wrote {} {} = {}\n", file.string(), figures[i].pointer, value);
  }
}

void run(const CorrelateArgs& args) {
  std::vector<CorrelationCase> cases = read_cases(args.cases);
  if (!args.group.empty()) {
    std::erase_if(cases, [&](const CorrelationCase& c) { return c.group != args.group; });
    if (cases.empty()) throw CorrelationError(fmt::format("--group {}: no such group", args.group));
  }
  // Read Chart.js before the runs, so that a missing one fails at once.
  std::string chartjs;
  if (!args.plot.empty()) {
    std::ifstream in(find_chartjs(args.chartjs), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    chartjs = buf.str();
  }
  const fs::path dir = fs::absolute(args.cases).parent_path();
  const ScratchDir scratch("neuronsim-correlate");
  if (!args.fit.empty()) return run_fit(args, cases, dir, scratch.path());
  if (args.write) throw CorrelationError("--write writes fitted figures: it needs --fit");
  const std::vector<CaseResult> results = simulate_all(cases, dir, scratch.path(), {}, args.jobs);
  const std::vector<GroupStats> stats = group_stats(results);
  fmt::print("{}", format_correlation(results, stats));
  if (!args.figures.empty())
    write_figures(args.figures, fs::path(args.cases).stem().string(), stats);
  if (args.max_error > 0) {
    std::vector<std::string> over;
    for (const CaseResult& r : results)
      if (std::abs(r.error()) * 100 > args.max_error)
        over.push_back(fmt::format("{}/{} ({:+.1f}%)", r.c.group, r.c.name, r.error() * 100));
    if (!over.empty())
      throw CorrelationError(fmt::format("{} of {} cases are off by more than {}%: {}", over.size(),
                                         results.size(), args.max_error, fmt::join(over, ", ")));
  }
  if (!args.plot.empty()) {
    std::ofstream out(args.plot, std::ios::binary);
    out << correlation_plot_html(results, stats, chartjs);
    out.close();
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write", args.plot));
    fmt::print("\nplot written to {}\n", args.plot);
  }
}

}  // namespace

void add_correlate_command(CLI::App& app) {
  auto args = std::make_shared<CorrelateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "correlate",
      "Simulate every case of a case file (spec/calibration/micro.csv) and compare with its "
      "measured figure: the error per case, MAPE and Pearson's r per group, a scatter plot");
  cmd->add_option("cases", args->cases, "the case file (CSV)")->required();
  cmd->add_option("--plot", args->plot,
                  "write the scatter plot (simulated against measured, log axes) and the tables "
                  "as one HTML file");
  cmd->add_option("--chartjs", args->chartjs, "Chart.js to inline in the plot (default: Debian's)");
  cmd->add_option("--group", args->group, "only the cases of this group");
  cmd->add_option("--figures", args->figures,
                  "write MAPE and the number of cases per group as benchmark figures (CSV "
                  "benchmark,metric,value: correlation/<set>/<group>)");
  cmd->add_option("--max-error", args->max_error,
                  "a gate: exit with status 1 naming every case whose error is larger than this "
                  "many percent")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--fit", args->fit,
                  "fit this free figure on the cases: FILE#POINTER=LO..HI, a figure of the "
                  "configurations folder and the range to search (repeat for several), e.g. "
                  "trn1.json#/dma_core_bytes_per_ns=50..368");
  cmd->add_option("--jobs,-j", args->jobs,
                  "cases simulated at once, each a process of its own (default: the cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--configs", args->configs,
                  "the chip configurations the fit starts from and writes (default spec/configs)");
  cmd->add_flag("--write", args->write,
                "write the fitted figures into --configs, with 'fitted on <cases>' as source");
  cmd->callback([args] { run(*args); });
}

}  // namespace neuronsim::bench
