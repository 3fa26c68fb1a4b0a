// `neuron-sim correlate --fit`: the figures of the chip configurations named as free, fitted on
// a calibration set (spec/calibration/), each written back with "fitted on <set>" as its source.
//
// A free figure is named by its configuration file and a JSON pointer to the figure's
// {"value", "source"} object, with the range to search: `trn1.json#/dma_core_bytes_per_ns=50..368`.
// Every evaluation copies the configurations, sets the figures, and simulates every case of the
// set with NEURONSIM_CONFIG_DIR pointing at the copy; the fit minimises the set's mean absolute
// percentage error by a golden-section search of each figure on a log scale (coordinate by
// coordinate, twice when several are free). The band of a figure is where, the others held at
// their fit, the set's MAPE stays within kBandPoints percentage points of the fit's: how
// tightly the set pins it.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "correlate.h"

namespace neuronsim::bench {

inline constexpr double kBandPoints = 2.0;

struct FreeFigure {
  std::string file;     // in the configurations folder, e.g. trn1.json
  std::string pointer;  // JSON pointer to the figure object, e.g. /dma_core_bytes_per_ns
  double lo = 0, hi = 0;
  std::string name() const { return file + "#" + pointer; }
};

// Parses FILE#POINTER=LO..HI. Throws CorrelationError saying what is wrong.
FreeFigure parse_free_figure(const std::string& text);

// The figure's value in the configurations folder. Throws CorrelationError naming it.
double figure_value(const std::filesystem::path& configs, const FreeFigure& f);

// Copies the configurations folder's JSON files into `to` with the figures set to `values`.
void write_configs(const std::filesystem::path& configs, const std::filesystem::path& to,
                   const std::vector<FreeFigure>& figures, const std::vector<double>& values);

// Replaces one figure object in a configuration's text, keeping the rest of the text as it is.
std::string replace_figure(const std::string& text, const std::string& pointer, double value,
                           const std::string& source, const std::string& where);

struct FitResult {
  std::vector<double> before, after;  // the figures' values
  double mape_before = 0, mape_after = 0;
  std::vector<std::pair<double, double>> bands;
  std::vector<CaseResult> cases_before, cases_after;
  size_t evaluations = 0;
};

// The cases simulated with the figures at the given values (one evaluation).
using Evaluate = std::function<std::vector<CaseResult>(const std::vector<double>&)>;

// The fit: starts from `start`, searches each figure's range.
FitResult fit_figures(const std::vector<FreeFigure>& figures, const std::vector<double>& start,
                      const Evaluate& evaluate);

double mape_percent(const std::vector<CaseResult>& results);

}  // namespace neuronsim::bench
