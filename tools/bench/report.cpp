// The static HTML report of a benchmark history (report.h).
#include "report.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gate.h"
#include "history.h"
#include "report_assets.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// JSON inside <script type="application/json">: "</" would end the element.
std::string script_json(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  for (size_t at = 0; (at = text.find("</", at)) != std::string::npos; at += 3)
    text.replace(at, 2, "<\\/");
  return text;
}

std::string number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{:.0f}", v);
  return fmt::format("{:.6g}", v);
}

std::string change(double before, double after) {
  const double rel = relative_difference(before, after);
  if (rel == 0) return "0";
  return std::isfinite(rel) ? fmt::format("{:+.3g}%", 100 * rel)
                            : fmt::format("{:+.6g}", after - before);
}

std::string short_commit(const std::string& c) {
  return c.substr(0, 10);
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
}

// An artifact's name as a plain file name: characters other than letters, digits, '.', '-', '_'
// become '_', and a name of dots only is "artifact" (no "..", no '/', no absolute path).
std::string file_name(const std::string& name) {
  std::string s;
  for (const char c : name)
    s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return s.find_first_not_of('.') == std::string::npos ? "artifact" : s;
}

// File names for benchmarks: "trn2/matmul_bf16" -> "trn2--matmul_bf16", unique.
class Slugs {
 public:
  std::string operator()(const std::string& benchmark) {
    if (const auto it = given_.find(benchmark); it != given_.end()) return it->second;
    std::string s;
    for (const char c : benchmark)
      s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'
               ? std::string(1, c)
           : c == '/' ? "--"
                      : "_";
    std::string unique = s;
    for (int n = 2; taken_.count(unique); ++n) unique = fmt::format("{}-{}", s, n);
    taken_.insert(unique);
    return given_[benchmark] = unique;
  }

 private:
  std::map<std::string, std::string> given_;
  std::set<std::string> taken_;
};

// Everything the pages are made from.
struct Model {
  std::string history;
  std::vector<RecordedRun> runs;
  std::map<FigureKey, Series> series;
  size_t latest = 0, previous = 0, baseline = 0;  // positions in runs
  bool has_previous = false;
  Margin margin;
};

// A figure's value in the run at `pos`, if it has one.
const SeriesPoint* at(const Model& m, const Series& s, size_t pos) {
  const int64_t id = m.runs[pos].id;
  for (const SeriesPoint& p : s.points)
    if (p.run == id) return &p;
  return nullptr;
}

struct Row {
  FigureKey key;
  std::string unit, status;  // status of the latest run against the previous one
  const SeriesPoint *latest = nullptr, *previous = nullptr, *baseline = nullptr;
};

Row row_of(const Model& m, const FigureKey& key, const Series& s) {
  Row r{key,
        s.unit,
        "",
        at(m, s, m.latest),
        m.has_previous ? at(m, s, m.previous) : nullptr,
        at(m, s, m.baseline)};
  if (r.latest && r.previous)
    r.status = classify(key.second, s.unit, r.previous->value, r.latest->value, m.margin);
  return r;
}

// The statuses of a series' points, each against the point before it.
std::vector<std::string> point_statuses(const Model& m, const FigureKey& key, const Series& s) {
  std::vector<std::string> out(s.points.size());
  for (size_t i = 1; i < s.points.size(); ++i)
    out[i] = classify(key.second, s.unit, s.points[i - 1].value, s.points[i].value, m.margin);
  return out;
}

bool moved(const std::vector<std::string>& statuses) {
  for (const auto& s : statuses)
    if (!s.empty()) return true;
  return false;
}

json chart(const Model& m, const std::string& id, const FigureKey& key, const Series& s) {
  json labels = json::array(), runs = json::array(), dates = json::array(), values = json::array();
  for (const SeriesPoint& p : s.points) {
    labels.push_back(short_commit(p.commit));
    runs.push_back(p.run);
    dates.push_back(p.date);
    values.push_back(p.value);
  }
  return {{"id", id},       {"benchmark", key.first}, {"metric", key.second},
          {"unit", s.unit}, {"labels", labels},       {"runs", runs},
          {"dates", dates}, {"values", values},       {"status", point_statuses(m, key, s)}};
}

std::string canvas(const std::string& id, const FigureKey& key, const std::string& unit,
                   const std::string& link) {
  return fmt::format(
      "<figure class=\"plot\"><figcaption><a href=\"{}\">{}</a> · {}{}</figcaption>"
      "<div class=\"canvas\"><canvas id=\"{}\"></canvas></div></figure>\n",
      html_escape(link), html_escape(key.first), html_escape(key.second),
      unit.empty() || unit == "count" ? "" : fmt::format(" ({})", html_escape(unit)), id);
}

std::string page(const std::string& title, const std::string& root, const std::string& body,
                 const json& charts) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{0}</title>\n<link rel=\"stylesheet\" href=\"{1}report.css\">\n"
      "<script src=\"{1}chart.min.js\"></script>\n<script src=\"{1}report.js\"></script>\n"
      "</head>\n<body data-root=\"{1}\">\n{2}\n"
      "<script type=\"application/json\" id=\"charts\">{3}</script>\n</body>\n</html>\n",
      html_escape(title), root, body, script_json(charts));
}

std::string run_label(const Model& m, size_t pos, const std::string& root) {
  const RecordedRun& r = m.runs[pos];
  return fmt::format("<a href=\"{}runs/{}.html\">run {}</a>, commit <code>{}</code>, {}, {}", root,
                     r.id, r.id, html_escape(short_commit(r.info.commit)), html_escape(r.info.date),
                     html_escape(r.info.machine));
}

std::string figures_table(const std::vector<Row>& rows, Slugs& slugs, const std::string& root,
                          bool with_benchmark) {
  std::string t =
      "<table class=\"figures\">\n<thead><tr>" +
      std::string(with_benchmark ? "<th>benchmark</th>" : "") +
      "<th>metric</th><th>unit</th><th>latest</th><th>Δ previous</th><th>Δ baseline</th>"
      "</tr></thead>\n<tbody>\n";
  for (const Row& r : rows) {
    const std::string latest = r.latest ? number(r.latest->value) : "—";
    const std::string prev =
        r.latest && r.previous ? change(r.previous->value, r.latest->value) : "";
    const std::string base =
        r.latest && r.baseline ? change(r.baseline->value, r.latest->value) : "";
    t += fmt::format("<tr class=\"{}\" data-benchmark=\"{}\" data-metric=\"{}\">", r.status,
                     html_escape(r.key.first), html_escape(r.key.second));
    if (with_benchmark)
      t += fmt::format("<td><a href=\"{}benchmarks/{}.html\">{}</a></td>", root, slugs(r.key.first),
                       html_escape(r.key.first));
    t += fmt::format(
        "<td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\" title=\"{}\">{}</td>"
        "<td class=\"num\" title=\"{}\">{}</td></tr>\n",
        html_escape(r.key.second), html_escape(r.unit), latest,
        r.previous ? "previous " + number(r.previous->value) : "", prev,
        r.baseline ? "baseline " + number(r.baseline->value) : "", base);
  }
  return t + "</tbody>\n</table>\n";
}

// The figure that sums a benchmark up: its time, else its rate; else its first metric.
const Row& headline(const std::vector<const Row*>& rows) {
  for (const char* name : {"total_time_ns", "total_ns", "simulated_us_per_step", "simulated_us",
                           "simulated_tokens_per_s", "time_us", "busbw", "achieved_tflops"})
    for (const Row* r : rows)
      if (r->key.second == name) return *r;
  return *rows.front();
}

int severity(const std::string& status) {
  return status == "regression" ? 3 : status == "change" ? 2 : status == "improvement" ? 1 : 0;
}

std::map<std::string, std::vector<const Row*>> by_benchmark(const std::vector<Row>& rows) {
  std::map<std::string, std::vector<const Row*>> out;
  for (const Row& r : rows) out[r.key.first].push_back(&r);
  return out;
}

size_t count_benchmarks(const std::vector<Row>& rows) {
  return by_benchmark(rows).size();
}

// One row per benchmark: its headline figure with its changes, and the figures that moved in
// the latest run; the row takes the worst of their statuses.
std::string overview_table(const std::vector<Row>& rows, Slugs& slugs) {
  std::string t =
      "<table class=\"figures overview\">\n<thead><tr><th>benchmark</th><th>headline</th>"
      "<th>unit</th><th>latest</th><th>Δ previous</th><th>Δ baseline</th><th>moved in the "
      "latest run</th></tr></thead>\n<tbody>\n";
  for (const auto& [benchmark, figures] : by_benchmark(rows)) {
    const Row& h = headline(figures);
    std::string status, moves;
    for (const Row* r : figures) {
      if (r->status.empty()) continue;
      if (severity(r->status) > severity(status)) status = r->status;
      moves +=
          fmt::format("{}<span class=\"{}\">{} {}</span>", moves.empty() ? "" : ", ", r->status,
                      html_escape(r->key.second), change(r->previous->value, r->latest->value));
    }
    t += fmt::format(
        "<tr class=\"{}\" data-benchmark=\"{}\" data-metric=\"{}\"><td><a "
        "href=\"benchmarks/{}.html\">{}</a></td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
        status, html_escape(benchmark), html_escape(h.key.second), slugs(benchmark),
        html_escape(benchmark), html_escape(h.key.second), html_escape(h.unit),
        number(h.latest->value), h.previous ? change(h.previous->value, h.latest->value) : "",
        h.baseline ? change(h.baseline->value, h.latest->value) : "", moves);
  }
  return t + "</tbody>\n</table>\n";
}

size_t find_baseline(const std::vector<RecordedRun>& runs, const std::string& commit) {
  if (commit.empty()) return 0;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].info.commit.rfind(commit, 0) == 0) return i;
  throw std::runtime_error(
      fmt::format("baseline {}: no run of that commit in the history", commit));
}

struct Writer {
  const Model& m;
  const ReportOptions& options;
  fs::path out;
  Slugs slugs;
  ReportSummary summary;

  void index() {
    std::vector<Row> rows;
    std::vector<std::string> regressions;
    json charts = json::array();
    std::string plots;
    size_t moved_figures = 0;
    for (const auto& [key, s] : m.series) {
      const Row r = row_of(m, key, s);
      if (!r.latest) continue;  // not measured by the latest run
      rows.push_back(r);
      if (r.status == "regression") {
        ++summary.regressions;
        regressions.push_back(
            fmt::format("<li><a href=\"benchmarks/{}.html\">{}</a> {}: {} → {} {} ({})</li>\n",
                        slugs(key.first), html_escape(key.first), html_escape(key.second),
                        number(r.previous->value), number(r.latest->value), html_escape(s.unit),
                        change(r.previous->value, r.latest->value)));
      }
    }
    // Plots of the figures that moved, those moving in the latest run first.
    std::vector<std::pair<int, FigureKey>> order;
    for (const auto& [key, s] : m.series) {
      if (!moved(point_statuses(m, key, s))) continue;
      ++moved_figures;
      const Row r = row_of(m, key, s);
      order.push_back({r.status == "regression" ? 0 : r.status.empty() ? 2 : 1, key});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < order.size() && i < options.index_plots; ++i) {
      const FigureKey& key = order[i].second;
      const std::string id = fmt::format("plot{}", i);
      charts.push_back(chart(m, id, key, m.series.at(key)));
      plots += canvas(id, key, m.series.at(key).unit, "benchmarks/" + slugs(key.first) + ".html");
    }
    summary.plots += charts.size();

    const RecordedRun& latest = m.runs[m.latest];
    std::string body = fmt::format(
        "<header>\n<h1>{}</h1>\n<p>History <code>{}</code>: {} runs, {} figures.</p>\n<dl>\n"
        "<dt>Latest</dt><dd>{}</dd>\n<dt>Previous</dt><dd>{}</dd>\n<dt>Baseline</dt><dd>{}</dd>\n"
        "</dl>\n</header>\n",
        html_escape(options.title), html_escape(fs::path(m.history).filename().string()),
        m.runs.size(), rows.size(), run_label(m, m.latest, ""),
        m.has_previous ? run_label(m, m.previous, "") : "none (the history has one run)",
        run_label(m, m.baseline, ""));
    body += fmt::format("<section id=\"regressions\">\n<h2>Regressions in run {} ({})</h2>\n",
                        latest.id, regressions.size());
    body += regressions.empty()
                ? "<p>None: no figure of the latest run moved the wrong way against the "
                  "previous run.</p>\n"
                : "<ul>\n" + fmt::format("{}", fmt::join(regressions, "")) + "</ul>\n";
    body += fmt::format(
        "</section>\n<section id=\"plots\">\n<h2>Figures that moved over the history ({})</h2>\n"
        "<p class=\"legend\"><span class=\"regression\">▲ regression</span> <span "
        "class=\"improvement\">● improvement</span> <span class=\"change\">◆ change</span> "
        "(against the run before; click a point for its run){}</p>\n<div class=\"plots\">\n{}"
        "</div>\n</section>\n",
        moved_figures,
        moved_figures > charts.size()
            ? fmt::format("; the first {} here, every one on its benchmark's page", charts.size())
            : "",
        plots);
    body += fmt::format(
        "<section id=\"overview\">\n<h2>Benchmarks ({})</h2>\n<p>Each benchmark's headline "
        "figure, and every figure that moved in the latest run.</p>\n{}</section>\n",
        count_benchmarks(rows), overview_table(rows, slugs));
    body += fmt::format(
        "<section id=\"figures\">\n<details>\n<summary>Every figure of the latest run ({})"
        "</summary>\n<p><input id=\"filter\" type=\"search\" placeholder=\"filter by benchmark or "
        "metric\"></p>\n{}</details>\n</section>\n",
        rows.size(), figures_table(rows, slugs, "", true));
    summary.figures = rows.size();
    write_text(out / "index.html", page(options.title, "", body, charts));
    ++summary.pages;
  }

  void benchmark_pages() {
    std::map<std::string, std::vector<FigureKey>> by_benchmark;
    for (const auto& [key, s] : m.series) by_benchmark[key.first].push_back(key);
    for (const auto& [benchmark, keys] : by_benchmark) {
      json charts = json::array();
      std::vector<Row> rows;
      std::string plots;
      for (size_t i = 0; i < keys.size(); ++i) {
        const Series& s = m.series.at(keys[i]);
        rows.push_back(row_of(m, keys[i], s));
        const std::string id = fmt::format("plot{}", i);
        charts.push_back(chart(m, id, keys[i], s));
        plots += canvas(id, keys[i], s.unit, "#" + id);
      }
      summary.plots += charts.size();
      const std::string body = fmt::format(
          "<header>\n<p><a href=\"../index.html\">{}</a></p>\n<h1>{}</h1>\n<p>Latest: {}</p>\n"
          "</header>\n<section>\n<h2>Metrics</h2>\n{}</section>\n<section>\n<h2>Over the "
          "runs</h2>\n<div class=\"plots\">\n{}</div>\n</section>\n",
          html_escape(options.title), html_escape(benchmark), run_label(m, m.latest, "../"),
          figures_table(rows, slugs, "../", false), plots);
      write_text(out / "benchmarks" / (slugs(benchmark) + ".html"),
                 page(benchmark + " — " + options.title, "../", body, charts));
      ++summary.pages;
    }
  }

  void run_pages() {
    for (size_t pos = 0; pos < m.runs.size(); ++pos) {
      const RecordedRun& run = m.runs[pos];
      std::string artifacts;
      if (pos + options.artifact_runs >= m.runs.size()) {
        for (const Artifact& a : read_artifacts(m.history, run.id)) {
          // The name comes from the history: a file name of its own, never a path out of the site.
          const fs::path rel = fs::path("artifacts") / std::to_string(run.id) / slugs(a.benchmark) /
                               file_name(a.name);
          write_text(out / rel, a.content);
          artifacts +=
              fmt::format("<li>{}: <a href=\"../{}\">{}</a>{}</li>\n", html_escape(a.benchmark),
                          html_escape(rel.generic_string()), html_escape(a.name),
                          a.name.find("trace") != std::string::npos
                              ? " — a Perfetto trace: open it in ui.perfetto.dev (Open trace file)"
                              : "");
        }
      }
      std::string rows;
      for (const auto& [key, s] : m.series) {
        const SeriesPoint* p = at(m, s, pos);
        if (!p) continue;
        const SeriesPoint* before = pos > 0 ? at(m, s, pos - 1) : nullptr;
        const std::string status =
            before ? classify(key.second, s.unit, before->value, p->value, m.margin) : "";
        rows += fmt::format(
            "<tr class=\"{}\"><td><a href=\"../benchmarks/{}.html\">{}</a></td><td>{}</td>"
            "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            status, slugs(key.first), html_escape(key.first), html_escape(key.second),
            html_escape(s.unit), number(p->value), before ? change(before->value, p->value) : "");
      }
      const std::string nav =
          fmt::format("{}{}",
                      pos > 0 ? fmt::format("<a href=\"{}.html\">← run {}</a> ", m.runs[pos - 1].id,
                                            m.runs[pos - 1].id)
                              : "",
                      pos + 1 < m.runs.size() ? fmt::format("<a href=\"{}.html\">run {} →</a>",
                                                            m.runs[pos + 1].id, m.runs[pos + 1].id)
                                              : "");
      const std::string body = fmt::format(
          "<header>\n<p><a href=\"../index.html\">{}</a> {}</p>\n<h1>Run {}</h1>\n<dl>\n"
          "<dt>Commit</dt><dd><code>{}</code></dd>\n<dt>Date</dt><dd>{}</dd>\n<dt>Machine</dt>"
          "<dd>{}</dd>\n<dt>Source</dt><dd>{}</dd>\n</dl>\n</header>\n<section id=\"artifacts\">\n"
          "<h2>Artifacts</h2>\n{}</section>\n<section>\n<h2>Figures</h2>\n<table "
          "class=\"figures\">\n<thead><tr><th>benchmark</th><th>metric</th><th>unit</th>"
          "<th>value</th><th>Δ previous run</th></tr></thead>\n<tbody>\n{}</tbody>\n</table>\n"
          "</section>\n",
          html_escape(options.title), nav, run.id, html_escape(run.info.commit),
          html_escape(run.info.date), html_escape(run.info.machine), html_escape(run.info.source),
          artifacts.empty()
              ? (pos + options.artifact_runs >= m.runs.size()
                     ? "<p>None recorded.</p>\n"
                     : "<p>Kept in the history; written for the latest runs only.</p>\n")
              : "<ul>\n" + artifacts + "</ul>\n",
          rows);
      write_text(
          out / "runs" / fmt::format("{}.html", run.id),
          page(fmt::format("Run {} — {}", run.id, options.title), "../", body, json::array()));
      ++summary.pages;
    }
  }
};

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

fs::path find_chartjs(const fs::path& given) {
  if (!given.empty()) {
    if (!fs::is_regular_file(given))
      throw std::runtime_error(fmt::format("--chartjs {}: no such file", given.string()));
    return given;
  }
  if (const char* env = std::getenv("NEURONSIM_CHARTJS"); env && *env) {
    if (!fs::is_regular_file(env))
      throw std::runtime_error(fmt::format("NEURONSIM_CHARTJS={}: no such file", env));
    return env;
  }
  // Debian's libjs-chart.js: 3.x ships chart.min.js; 4.x builds are named chart.umd*.js.
  const fs::path debian = "/usr/share/javascript/chart.js";
  for (const char* name : {"chart.min.js", "chart.umd.min.js", "chart.umd.js", "chart.js"})
    if (fs::is_regular_file(debian / name)) return debian / name;
  throw std::runtime_error(
      "Chart.js not found: install Debian's libjs-chart.js (scripts/setup.sh does), or give "
      "the file with --chartjs FILE or NEURONSIM_CHARTJS");
}

ReportSummary write_report(const std::string& history, const fs::path& out_dir,
                           const ReportOptions& options) {
  const fs::path chartjs = find_chartjs(options.chartjs);
  Model m;
  m.history = history;
  m.runs = read_runs(history);
  if (m.runs.empty()) throw std::runtime_error(fmt::format("{}: the history has no run", history));
  m.series = series_of(read_history(history));
  m.margin = options.margin;
  m.latest = m.runs.size() - 1;
  m.has_previous = m.runs.size() > 1;
  m.previous = m.has_previous ? m.latest - 1 : m.latest;
  m.baseline = find_baseline(m.runs, options.baseline);

  fs::create_directories(out_dir);
  fs::copy_file(chartjs, out_dir / "chart.min.js", fs::copy_options::overwrite_existing);
  write_text(out_dir / "report.js", std::string(kReportJs));
  write_text(out_dir / "report.css", std::string(kReportCss));
  Writer w{m, options, out_dir, {}, {}};
  w.index();
  w.benchmark_pages();
  w.run_pages();
  w.summary.runs = m.runs.size();
  w.summary.index = out_dir / "index.html";
  return w.summary;
}

}  // namespace neuronsim::bench
