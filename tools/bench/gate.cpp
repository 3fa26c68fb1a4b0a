// The gate against the history (gate.h).
#include "gate.h"

#include <cmath>

#include <fmt/format.h>

namespace neuronsim::bench {
namespace {

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string short_commit(const std::string& commit) {
  return commit.substr(0, 12);
}

std::string with_unit(double value, const std::string& unit) {
  const std::string v = format_value(value);
  return unit.empty() || unit == "count" || unit == "1" ? v : fmt::format("{} {}", v, unit);
}

std::string change_text(double before, double after) {
  const double rel = relative_difference(before, after);
  return std::isfinite(rel) ? fmt::format("{:+.4g}%", 100 * rel)
                            : fmt::format("{:+}", after - before);
}

std::string where(const SeriesPoint& p) {
  return fmt::format("commit {} ({}, run {})", short_commit(p.commit), p.date, p.run);
}

}  // namespace

std::map<FigureKey, Series> series_of(const std::vector<RecordedFigure>& history) {
  std::map<FigureKey, Series> out;
  for (const RecordedFigure& f : history) {  // read_history orders by run
    Series& s = out[{f.benchmark, f.metric}];
    s.unit = f.unit;
    s.points.push_back({f.run, f.info.commit, f.info.date, f.value});
  }
  return out;
}

Better better_direction(const std::string& metric, const std::string& unit) {
  // The memory a workload needs, the share of its time spent waiting and the simulator's error
  // against measured figures (neuron-sim correlate --figures) are costs.
  if (has(metric, "peak_memory") || ends_with(metric, "_share") || has(metric, "mape"))
    return Better::lower;
  // Op tests (neuronsim.tools.opinfo --figures): entries that ran on the device alone are
  // wanted; those that fell back to the CPU, mismatched or failed are not.
  if (metric == "no_fallback") return Better::higher;
  if (metric == "fallback" || metric == "mismatch" || metric == "error" || metric == "fallbacks")
    return Better::lower;
  // A theoretical peak is a property of the configuration, not a result.
  if (metric.rfind("peak_", 0) == 0) return Better::neither;
  if (has(metric, "per_s") || has(metric, "achieved_") || has(metric, "fraction_of_peak") ||
      has(metric, "mfu") || has(metric, "bw") || has(metric, "bandwidth") ||
      has(metric, "tflops") || has(unit, "/s") || has(unit, "/ns") || has(unit, "/cycle"))
    return Better::higher;
  if (unit == "ns" || unit == "us" || unit == "ms" || unit == "s" || unit == "ps" ||
      unit == "cycles" || has(metric, "cycles") || ends_with(metric, "_ns") ||
      ends_with(metric, "_us") || has(metric, "_us_"))
    return Better::lower;
  return Better::neither;
}

std::string classify(const std::string& metric, const std::string& unit, double before,
                     double after, const Margin& margin) {
  if (margin.admits(before, after)) return "";
  switch (better_direction(metric, unit)) {
    case Better::lower:
      return after > before ? "regression" : "improvement";
    case Better::higher:
      return after < before ? "regression" : "improvement";
    case Better::neither:
      break;
  }
  return "change";
}

size_t last_change(const std::vector<SeriesPoint>& points, const Margin& margin) {
  if (points.empty()) return 0;
  size_t i = points.size() - 1;
  while (i > 0 && margin.admits(points.back().value, points[i - 1].value)) --i;
  return i;
}

HistoryGateReport check_against_history(const std::map<FigureKey, Series>& history,
                                        const std::vector<Measurement>& run,
                                        const ExpectedFile* margins, const Margin& default_margin) {
  HistoryGateReport report;
  std::map<FigureKey, bool> in_run;
  for (const Measurement& m : run) {
    const FigureKey key{m.benchmark, m.metric};
    if (in_run.count(key))
      throw std::invalid_argument(fmt::format("the run holds {} {} twice", m.benchmark, m.metric));
    in_run[key] = true;
    const auto found = history.find(key);
    if (found == history.end() || found->second.points.empty()) {
      report.new_figures.push_back(m);
      continue;
    }
    ++report.compared;
    const ExpectedRow* row = margins ? margins->find(m.benchmark, m.metric) : nullptr;
    const Margin margin = row ? row->margin : default_margin;
    const Series& s = found->second;
    const double old_value = s.points.back().value;
    if (margin.admits(old_value, m.value)) continue;
    const std::string unit = m.unit.empty() ? s.unit : m.unit;
    const size_t since = last_change(s.points, margin);
    report.moves.push_back({m.benchmark, m.metric, unit,
                            classify(m.metric, unit, old_value, m.value, margin), old_value,
                            m.value, margin, s.points[since], since == 0});
  }
  for (const auto& [key, s] : history)
    if (!in_run.count(key)) report.absent.push_back(key);
  return report;
}

std::string format_history_report(const HistoryGateReport& report) {
  std::string out;
  for (const HistoryMove& m : report.moves)
    out += fmt::format(
        "{} {} {}: {} -> {} ({}, margin {}); {} {}\n",
        m.kind == "change"       ? "CHANGED"
        : m.kind == "regression" ? "REGRESSION"
                                 : "IMPROVED",
        m.benchmark, m.metric, with_unit(m.old_value, m.unit), with_unit(m.new_value, m.unit),
        change_text(m.old_value, m.new_value), m.margin.text(),
        m.first_value ? "unchanged since its first record," : "last changed in", where(m.since));
  constexpr size_t kListed = 10;  // a first run of a new suite is all new figures
  for (size_t i = 0; i < report.new_figures.size() && i < kListed; ++i)
    out += fmt::format("new {} {}: {} (not in the history)\n", report.new_figures[i].benchmark,
                       report.new_figures[i].metric, format_value(report.new_figures[i].value));
  if (report.new_figures.size() > kListed)
    out += fmt::format("... and {} more new figures\n", report.new_figures.size() - kListed);
  if (!report.absent.empty())
    out += fmt::format("{} figures of the history are not in this run (not failures)\n",
                       report.absent.size());
  out += fmt::format("{} compared, {} within their margin, {} moved\n", report.compared,
                     report.compared - report.moves.size(), report.moves.size());
  return out;
}

std::string history_note(const std::map<FigureKey, Series>& history, const std::string& benchmark,
                         const std::string& metric, const Margin& margin) {
  const auto found = history.find({benchmark, metric});
  if (found == history.end() || found->second.points.empty()) return "";
  const auto& points = found->second.points;
  const size_t i = last_change(points, margin);
  if (i == 0)
    return fmt::format("{} in the history since its first record, {}",
                       format_value(points.back().value), where(points[0]));
  return fmt::format("{} in the history, last changed in {} from {}", format_value(points[i].value),
                     where(points[i]), format_value(points[i - 1].value));
}

}  // namespace neuronsim::bench
