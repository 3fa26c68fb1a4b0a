// The expected-results checker of `neuron-sim bench`: reads bench/expected_results.csv,
// compares a run's measurements with it, and rewrites it (--update). Kept apart
// from the benchmarks so that tests/cpp/bench can test it without a simulator.
//
// File format (bench/README.md): `#` comment lines and blank lines anywhere, then
// the header `benchmark,metric,value,margin`, then one row per gated figure. The
// margin is relative (`0.001`: |actual - expected| <= 0.001 * |expected|) or,
// prefixed with `abs:`, absolute (`abs:5`: |actual - expected| <= 5); `abs:0` is
// an exact match. Run files (--csv) have the header `benchmark,metric,value`.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace neuronsim::bench {

// One figure of a run.
struct Measurement {
  std::string benchmark;
  std::string metric;
  double value = 0;
  std::string unit = {};  // as the source gave it; empty: from the metric's name (unit_of)
};

// A malformed expected file or margin; the message names the file and line.
class ExpectedFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Margin {
  enum class Kind { relative, absolute };
  Kind kind = Kind::relative;
  double value = 0.01;
  // Whether `actual` is within the margin of `expected` (boundary included).
  bool admits(double expected, double actual) const;
  // The canonical spelling: "0.01", "abs:5".
  std::string text() const;
};

// Parses "0.01" (relative) or "abs:5" (absolute); the number must be finite and
// >= 0. Throws std::invalid_argument saying what is wrong.
Margin parse_margin(std::string_view text);

inline constexpr std::string_view kExpectedHeader = "benchmark,metric,value,margin";
inline constexpr std::string_view kResultsHeader = "benchmark,metric,value";

struct ExpectedRow {
  std::string benchmark;
  std::string metric;
  double value = 0;
  Margin margin;
  std::string margin_text;  // as written in the file, kept verbatim by --update
  size_t line = 0;          // 1-based line in the file
};

struct ExpectedFile {
  std::vector<std::string> preamble;  // the comment and blank lines before the header
  std::vector<ExpectedRow> rows;      // in file order
  const ExpectedRow* find(std::string_view benchmark, std::string_view metric) const;
};

// Parses the text of an expected file; `source` names it in errors
// ("bench/expected_results.csv:12: ..."). Throws ExpectedFileError.
ExpectedFile parse_expected(std::string_view text, const std::string& source);
// Reads and parses a file. Throws ExpectedFileError (also when it cannot be read).
ExpectedFile read_expected(const std::filesystem::path& path);

struct RowOutcome {
  enum class Status { pass, out_of_margin, missing };
  ExpectedRow expected;
  Status status = Status::pass;
  double actual = 0;  // when not missing
};

struct CheckReport {
  std::vector<RowOutcome> rows;        // one per expected row, in file order
  std::vector<Measurement> not_gated;  // in the run, not in the file (not failures)
  size_t passed = 0;
  size_t failed = 0;  // out of margin + missing
  bool ok() const { return failed == 0; }
};

// Compares every expected row with the run. Throws std::invalid_argument when the
// run holds the same (benchmark, metric) twice.
CheckReport check(const ExpectedFile& expected, const std::vector<Measurement>& run);

// (actual - expected) / |expected|; +-infinity when expected is 0 and actual is not, 0 when both
// are.
double relative_difference(double expected, double actual);

// The report as text: one line per failure (expected, actual, difference, relative
// difference, margin), one per not-gated figure, then "N passed, N failed".
std::string format_report(const CheckReport& report);

// The shortest text that reads back as the same double ("1424.695", "2.5e-05", "0").
std::string format_value(double value);

// A run as CSV: the header `benchmark,metric,value` and one row per measurement.
std::string results_csv(const std::vector<Measurement>& run);

struct UpdateSummary {
  size_t kept = 0;                   // rows that kept their margin
  std::vector<Measurement> added;    // new rows (default margin)
  std::vector<ExpectedRow> removed;  // rows of the old file that the run no longer produces
  size_t changed = 0;                // kept rows whose value changed
};

// The new expected file for `run`: the old file's preamble (or a default one when
// there is no old file), the header, then one row per measurement in run order,
// each with its old margin, or `default_margin` for new rows.
std::string updated_expected(const std::optional<ExpectedFile>& existing,
                             const std::vector<Measurement>& run, const Margin& default_margin,
                             UpdateSummary* summary = nullptr);

}  // namespace neuronsim::bench
