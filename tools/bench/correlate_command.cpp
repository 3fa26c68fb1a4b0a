// `neuron-sim correlate cases.csv`: simulated against measured figures (correlate.h).
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "correlate.h"
#include "report.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;

struct CorrelateArgs {
  std::string cases, plot, chartjs, group;
};

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
  const fs::path neuron_sim = fs::read_symlink("/proc/self/exe");
  const fs::path dir = fs::absolute(args.cases).parent_path();
  const fs::path scratch = fs::temp_directory_path() /
                           fmt::format("neuronsim-correlate-{}", static_cast<long>(::getpid()));
  std::vector<CaseResult> results;
  for (size_t i = 0; i < cases.size(); ++i) {
    results.push_back(
        {cases[i], simulate_case(cases[i], dir, neuron_sim, scratch / std::to_string(i))});
  }
  fs::remove_all(scratch);
  const std::vector<GroupStats> stats = group_stats(results);
  fmt::print("{}", format_correlation(results, stats));
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
      "Simulate every case of a case file (bench/calibration/micro.csv) and compare with its "
      "measured figure: the error per case, MAPE and Pearson's r per group, a scatter plot");
  cmd->add_option("cases", args->cases, "the case file (CSV)")->required();
  cmd->add_option("--plot", args->plot,
                  "write the scatter plot (simulated against measured, log axes) and the tables "
                  "as one HTML file");
  cmd->add_option("--chartjs", args->chartjs, "Chart.js to inline in the plot (default: Debian's)");
  cmd->add_option("--group", args->group, "only the cases of this group");
  cmd->callback([args] { run(*args); });
}

}  // namespace neuronsim::bench
