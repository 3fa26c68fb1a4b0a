// `neuron-sim report history.db -o site/`: a static HTML dashboard of a benchmark history
// (history.h) that opens from the file system with no network. Chart.js is copied beside the
// pages (Debian's libjs-chart.js, or --chartjs FILE), with the report's own script and style.
//
//   index.html            the latest run against the previous one and the baseline: the
//                         regressions, a plot of every figure that moved over the history (the
//                         moves marked on their points), and an overview table of every figure
//   benchmarks/<b>.html   one benchmark: a plot per metric over the runs, its values run by run
//   runs/<id>.html        one run: its commit, date and machine, every figure with its change,
//                         and its artifacts (Perfetto traces), written under artifacts/<id>/
//
// Tables are static HTML (readable without JavaScript); report.js draws the plots from the
// JSON each page carries and sets <body data-rendered="N"> when N plots are drawn.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "expected.h"

namespace neuronsim::bench {

struct ReportOptions {
  std::string title = "neuronsim benchmarks";
  std::string baseline;  // commit (or its prefix) of the baseline run; empty: the first run
  Margin margin{Margin::Kind::relative, 1e-6};  // a move smaller than this is no move
  std::filesystem::path chartjs;                // empty: find_chartjs()
  size_t index_plots = 60;                      // plots on index.html at most
  size_t artifact_runs = 10;                    // artifacts are written for the latest N runs
};

struct ReportSummary {
  size_t runs = 0, figures = 0, regressions = 0, plots = 0, pages = 0;
  std::filesystem::path index;
};

// `text` with &, <, > and " as HTML entities: safe in element text and quoted attributes.
std::string html_escape(const std::string& text);

// Chart.js: `given` when not empty, else $NEURONSIM_CHARTJS, else Debian's
// /usr/share/javascript/chart.js/chart.min.js (or the chart.umd*.js of Chart.js 4). Throws
// std::runtime_error saying what to install.
std::filesystem::path find_chartjs(const std::filesystem::path& given);

// Writes the site into `out_dir` (created; files of an earlier report are overwritten).
// Throws HistoryError for an unreadable history, std::runtime_error for an empty one or an
// unknown baseline, and for files it cannot write.
ReportSummary write_report(const std::string& history, const std::filesystem::path& out_dir,
                           const ReportOptions& options);

}  // namespace neuronsim::bench
