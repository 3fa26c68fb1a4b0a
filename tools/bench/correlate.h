// `neuron-sim correlate cases.csv`: how close the simulator comes to measured figures, after
// Accel-Sim's correlation plots. Each case names what to simulate (an assembly program or a
// NEFF on an instance, or a cc-bench spec), the simulated figure to take, and the measured
// value with its source; the tool runs every case and reports the error of each, and per group
// the mean absolute percentage error and Pearson's r of the raw and the log values, and draws
// simulated against measured on log axes.
//
// The case file (spec/calibration/micro.csv): `#` comments, the header
//   group,case,kind,spec,metric,per,measured,unit,source
// then a row per case. The source is the rest of the line (it may hold commas; no other field
// may). kind: `asm` (spec: an assembly file and `neuron-sim run` options), `neff` (a NEFF and run
// options), `cc` (cc-bench arguments giving one size), `nki` (a kernel of the calibration set and
// its options: python -m neuronsim.tools.calibration). metric: a figure of the run's metrics
// (default total_time_ns; cc: time_us; nki: latency_ns); per: the simulated figure is divided by it
// (a stream of N instructions against a per-instruction latency); unit: ns, us or ms. Paths in
// specs are relative to the case file's folder.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace neuronsim::bench {

class CorrelationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CorrelationCase {
  std::string group, name, kind, spec, metric;
  double per = 1;
  double measured_ns = 0;
  std::string source;
  size_t line = 0;  // in the case file
};

// Reads a case file. Throws CorrelationError naming the file and line.
std::vector<CorrelationCase> read_cases(const std::filesystem::path& file);

struct CaseResult {
  CorrelationCase c;
  double simulated_ns = 0;
  double error() const { return (simulated_ns - c.measured_ns) / c.measured_ns; }
};

struct GroupStats {
  std::string group;  // "all" for every case together
  size_t n = 0;
  double mape_percent = 0;
  std::optional<double> r, r_log;  // Pearson's r; with 3 cases or more
};

// Pearson's correlation of two series of the same length (nullopt when either is constant).
std::optional<double> pearson(const std::vector<double>& x, const std::vector<double>& y);

// Per group in the order of first appearance, then "all".
std::vector<GroupStats> group_stats(const std::vector<CaseResult>& results);

// The table: a row per case (simulated, measured, error), then a row per group.
std::string format_correlation(const std::vector<CaseResult>& results,
                               const std::vector<GroupStats>& stats);

// A self-contained HTML page (Chart.js inlined) with the scatter plot on log axes, the y = x
// line, and the tables.
std::string correlation_plot_html(const std::vector<CaseResult>& results,
                                  const std::vector<GroupStats>& stats, const std::string& chartjs);

// Simulates one case with the neuron-sim at `neuron_sim`, working in `scratch`, with the chip
// configurations of `configs` (NEURONSIM_CONFIG_DIR) unless it is empty; returns the figure in
// ns, divided by `per`. A case of kind nki runs `python -m neuronsim.tools.calibration SPEC`
// with $NEURONSIM_PYTHON (default python3). Throws CorrelationError naming the case and what
// failed.
double simulate_case(const CorrelationCase& c, const std::filesystem::path& case_dir,
                     const std::filesystem::path& neuron_sim, const std::filesystem::path& scratch,
                     const std::filesystem::path& configs = {});

}  // namespace neuronsim::bench
