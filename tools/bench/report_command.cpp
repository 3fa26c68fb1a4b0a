// `neuron-sim report history.db -o site/`: the static HTML dashboard of a benchmark history
// (report.h).
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "report.h"

namespace neuronsim::bench {
namespace {

struct ReportArgs {
  std::string history, out_dir, margin = "1e-06", chartjs;
  ReportOptions options;
};

void run(ReportArgs& args) {
  args.options.margin = parse_margin(args.margin);
  args.options.chartjs = args.chartjs;
  const ReportSummary s = write_report(args.history, args.out_dir, args.options);
  fmt::print(
      "wrote {} ({} pages, {} plots): {} runs, {} figures in the latest run, {} regressions "
      "against the run before\n",
      s.index.string(), s.pages, s.plots, s.runs, s.figures, s.regressions);
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write a static HTML dashboard of a benchmark history (neuron-sim bench --record): the "
      "latest run against the previous one and a baseline, a plot per figure over the commits, "
      "each run's figures and traces. Opens from disk, no network");
  cmd->add_option("history", args->history, "the history database (SQLite)")->required();
  cmd->add_option("-o,--out", args->out_dir, "the site's directory (created)")->required();
  cmd->add_option("--baseline", args->options.baseline,
                  "commit (or prefix) of the baseline run (default: the first run)");
  cmd->add_option("--margin", args->margin,
                  "moves within this margin are no moves: relative (1e-06) or absolute (abs:5)")
      ->capture_default_str();
  cmd->add_option("--title", args->options.title, "the pages' title")->capture_default_str();
  cmd->add_option("--chartjs", args->chartjs,
                  "Chart.js to copy beside the pages (default: $NEURONSIM_CHARTJS, then "
                  "Debian's libjs-chart.js)");
  cmd->add_option("--plots", args->options.index_plots, "plots on the front page at most")
      ->capture_default_str();
  cmd->callback([args] { run(*args); });
}

}  // namespace neuronsim::bench
