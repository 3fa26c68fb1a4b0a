// The benchmark history of `neuron-sim bench --record history.db`: every run's figures appended
// to an SQLite database (commit, date, machine, benchmark, metric, value, unit), readable with
// any SQLite tool, from which the gate and the report read a benchmark's past.
//
// Schema (PRAGMA application_id 0x4e534248 "NSBH", user_version 2):
//   runs(id INTEGER PRIMARY KEY, commit_id TEXT, date TEXT, machine TEXT, source TEXT)
//   results(run INTEGER REFERENCES runs(id), benchmark TEXT, metric TEXT, value REAL, unit TEXT,
//           PRIMARY KEY (run, benchmark, metric))
//   artifacts(run INTEGER REFERENCES runs(id), benchmark TEXT, name TEXT, content BLOB,
//           PRIMARY KEY (run, benchmark, name))     -- e.g. a benchmark's Perfetto trace
// Version 1 (no artifacts) is upgraded in place on the first write.
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

// A file a benchmark left with its figures (its Perfetto trace), kept in the history so that
// the report can link it long after the run's working files are gone.
struct Artifact {
  std::string benchmark;
  std::string name;  // file name, e.g. "trace.json"
  std::string content;
};

struct RecordedRun {
  int64_t id = 0;
  RunInfo info;
};

// The unit of a metric, from the suffix of its name (`total_ns` -> "ns", `dma_bytes` -> "B",
// `achieved_bytes_per_ns` -> "B/ns", `fraction_of_peak` -> "1", counts -> "count").
std::string unit_of(const std::string& metric);

// Appends one run and returns its id. Creates the database (and its schema) when the file does
// not exist. Throws HistoryError; then nothing of the run is written.
// A figure's own unit (Measurement::unit) wins over the name's.
int64_t record_run(const std::string& path, const RunInfo& info,
                   const std::vector<Measurement>& figures,
                   const std::vector<Artifact>& artifacts = {});

// Every recorded figure, by run then benchmark then metric.
std::vector<RecordedFigure> read_history(const std::string& path);

// Every run, oldest first (also those that recorded no figure).
std::vector<RecordedRun> read_runs(const std::string& path);

// The artifacts of one run (names and contents).
std::vector<Artifact> read_artifacts(const std::string& path, int64_t run);

}  // namespace neuronsim::bench
