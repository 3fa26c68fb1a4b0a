// The benchmark history of `neuron-sim bench --record history.db`: every run's figures appended
// to an SQLite database (commit, date, machine, benchmark, metric, value, unit), readable with
// any SQLite tool, from which the gate and the report read a benchmark's past.
//
// Schema (PRAGMA application_id 0x4e534248 "NSBH", user_version 1):
//   runs(id INTEGER PRIMARY KEY, commit_id TEXT, date TEXT, machine TEXT, source TEXT)
//   results(run INTEGER REFERENCES runs(id), benchmark TEXT, metric TEXT, value REAL, unit TEXT,
//           PRIMARY KEY (run, benchmark, metric))
// A run is written in one transaction: it lands whole or not at all, and a failure leaves the
// rows already there as they were.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "expected.h"

namespace neuronsim::bench {

// A database that cannot be opened, is not a benchmark history, or refuses a write; the
// message names the file and what SQLite said.
class HistoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunInfo {
  std::string commit;   // the commit the run measured
  std::string date;     // ISO 8601, UTC
  std::string machine;  // the host that ran it (simulated figures do not depend on it)
  std::string source;   // what produced the figures, e.g. "neuron-sim bench"
};

struct RecordedFigure {
  int64_t run = 0;
  RunInfo info;
  std::string benchmark, metric, unit;
  double value = 0;
};

// The unit of a metric, from the suffix of its name (`total_ns` -> "ns", `dma_bytes` -> "B",
// `achieved_bytes_per_ns` -> "B/ns", `fraction_of_peak` -> "1", counts -> "count").
std::string unit_of(const std::string& metric);

// Appends one run and returns its id. Creates the database (and its schema) when the file does
// not exist. Throws HistoryError; then nothing of the run is written.
int64_t record_run(const std::string& path, const RunInfo& info,
                   const std::vector<Measurement>& figures);

// Every recorded figure, by run then benchmark then metric.
std::vector<RecordedFigure> read_history(const std::string& path);

}  // namespace neuronsim::bench
