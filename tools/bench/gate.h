// The gate against the history: a run's figures compared with the latest value each had in
// `neuron-sim bench --record`'s database, and, for every figure that moved, the commit that
// last changed it. Also the direction in which a figure gets better, which the gate and the
// report (report.h) use to tell a regression from an improvement.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "expected.h"
#include "history.h"

namespace neuronsim::bench {

// One figure's value in one recorded run.
struct SeriesPoint {
  int64_t run = 0;
  std::string commit, date;
  double value = 0;
};

// Every figure's values, oldest run first, keyed by (benchmark, metric).
using FigureKey = std::pair<std::string, std::string>;
struct Series {
  std::string unit;
  std::vector<SeriesPoint> points;
};
std::map<FigureKey, Series> series_of(const std::vector<RecordedFigure>& history);

// Which way a figure gets better: times down, rates and shares of a peak up; counts (bytes,
// instructions, kernels) have no better way, only changes.
enum class Better { lower, higher, neither };
Better better_direction(const std::string& metric, const std::string& unit);

// What a move from `before` to `after` is, outside `margin`: "regression", "improvement",
// "change" (a figure with no better way), or "" (within the margin).
std::string classify(const std::string& metric, const std::string& unit, double before,
                     double after, const Margin& margin);

// The index of the point at which a series took its latest value: the first of the trailing
// points equal (within `margin`) to the last one. 0 when it never changed.
size_t last_change(const std::vector<SeriesPoint>& points, const Margin& margin);

// A figure of the run that left its margin around the history's latest value.
struct HistoryMove {
  std::string benchmark, metric, unit, kind;  // kind: as classify()
  double old_value = 0, new_value = 0;
  Margin margin;
  SeriesPoint since;         // the run (and commit) that last changed the old value
  bool first_value = false;  // `since` is the figure's first record: it never changed before
};

struct HistoryGateReport {
  std::vector<HistoryMove> moves;
  std::vector<Measurement> new_figures;  // in the run, never recorded (not failures)
  std::vector<FigureKey> absent;         // recorded before, not in this run (not failures)
  size_t compared = 0;
  bool ok() const { return moves.empty(); }
};

// Compares every figure of `run` with the latest value the history has for it. The margin of
// a figure is its row's in `margins` when given, else `default_margin`.
HistoryGateReport check_against_history(const std::map<FigureKey, Series>& history,
                                        const std::vector<Measurement>& run,
                                        const ExpectedFile* margins, const Margin& default_margin);

// One line per move: benchmark, metric, old -> new value with the unit, the change, the
// margin, and the commit that last changed it; then the counts.
std::string format_history_report(const HistoryGateReport& report);

// For a failure of the expected-file gate: "last changed in commit C (date, run N), from X to
// Y" or "unchanged since its first record, commit C (date, run N)"; empty when the history
// has no such figure.
std::string history_note(const std::map<FigureKey, Series>& history, const std::string& benchmark,
                         const std::string& metric, const Margin& margin);

}  // namespace neuronsim::bench
