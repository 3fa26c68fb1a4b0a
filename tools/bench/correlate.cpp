// The correlation of simulated and measured figures (correlate.h).
#include "correlate.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "imports.h"
#include "report.h"
#include "shell.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHeader = "group,case,kind,spec,metric,per,measured,unit,source";

double number(const std::string& text, const std::string& where, const char* what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v) || v <= 0)
    throw CorrelationError(fmt::format("{}: {} '{}' is not a positive number", where, what, text));
  return v;
}

double unit_ns(const std::string& unit, const std::string& where) {
  if (unit == "ns") return 1;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  throw CorrelationError(fmt::format("{}: unit '{}': expected ns, us or ms", where, unit));
}

std::string fixed(double v) {
  return fmt::format("{:.1f}", v);
}

}  // namespace

std::vector<CorrelationCase> read_cases(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw CorrelationError(fmt::format("{}: cannot read the cases", file.string()));
  std::vector<CorrelationCase> out;
  std::string line;
  size_t number_of_line = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number_of_line;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string where = fmt::format("{}:{}", file.string(), number_of_line);
    if (!header) {
      if (line != kHeader)
        throw CorrelationError(fmt::format("{}: expected the header '{}'", where, kHeader));
      header = true;
      continue;
    }
    std::vector<std::string> f;
    size_t at = 0;
    for (int i = 0; i < 8; ++i) {
      const size_t comma = line.find(',', at);
      if (comma == std::string::npos)
        throw CorrelationError(fmt::format("{}: expected 9 fields ({})", where, kHeader));
      f.push_back(line.substr(at, comma - at));
      at = comma + 1;
    }
    f.push_back(line.substr(at));  // the source: the rest of the line
    CorrelationCase c{f[0], f[1], f[2], f[3], f[4], 1, 0, f[8], number_of_line};
    if (c.group.empty() || c.name.empty() || c.spec.empty() || c.source.empty())
      throw CorrelationError(
          fmt::format("{}: group, case, spec and source must not be empty", where));
    if (c.group == "all")
      throw CorrelationError(
          fmt::format("{}: group 'all' is the total of every case: name it otherwise", where));
    if (c.kind != "asm" && c.kind != "neff" && c.kind != "cc" && c.kind != "nki")
      throw CorrelationError(
          fmt::format("{}: kind '{}': expected asm, neff, cc or nki", where, c.kind));
    if (c.metric.empty())
      c.metric = c.kind == "cc" ? "time_us" : c.kind == "nki" ? "latency_ns" : "total_time_ns";
    if (!f[5].empty()) c.per = number(f[5], where, "per");
    c.measured_ns = number(f[6], where, "measured") * unit_ns(f[7], where);
    out.push_back(std::move(c));
  }
  if (!header) throw CorrelationError(fmt::format("{}: no header '{}'", file.string(), kHeader));
  if (out.empty()) throw CorrelationError(fmt::format("{}: no cases", file.string()));
  return out;
}

std::optional<double> pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2 || y.size() != n) return std::nullopt;
  const double count = static_cast<double>(n);
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i] / count, my += y[i] / count;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<GroupStats> group_stats(const std::vector<CaseResult>& results) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CaseResult*>> groups;
  for (const CaseResult& r : results) {
    if (!groups.count(r.c.group)) order.push_back(r.c.group);
    groups[r.c.group].push_back(&r);
    groups["all"].push_back(&r);
  }
  order.push_back("all");
  std::vector<GroupStats> out;
  for (const std::string& g : order) {
    const auto& members = groups[g];
    GroupStats s{g, members.size(), 0, {}, {}};
    std::vector<double> sim, meas, log_sim, log_meas;
    for (const CaseResult* r : members) {
      s.mape_percent += 100 * std::fabs(r->error()) / static_cast<double>(members.size());
      sim.push_back(r->simulated_ns);
      meas.push_back(r->c.measured_ns);
      log_sim.push_back(std::log10(r->simulated_ns));
      log_meas.push_back(std::log10(r->c.measured_ns));
    }
    if (members.size() >= 3) {  // two points always lie on a line
      s.r = pearson(meas, sim);
      s.r_log = pearson(log_meas, log_sim);
    }
    out.push_back(s);
  }
  return out;
}

std::string format_correlation(const std::vector<CaseResult>& results,
                               const std::vector<GroupStats>& stats) {
  size_t width = 4;
  for (const CaseResult& r : results)
    width = std::max(width, r.c.group.size() + r.c.name.size() + 1);
  std::string out = fmt::format("{:<{}}  {:>14}  {:>14}  {:>9}\n", "case", width, "simulated(ns)",
                                "measured(ns)", "error");
  for (const CaseResult& r : results)
    out += fmt::format("{:<{}}  {:>14}  {:>14}  {:>+8.1f}%\n", r.c.group + "/" + r.c.name, width,
                       fixed(r.simulated_ns), fixed(r.c.measured_ns), 100 * r.error());
  out += fmt::format("\n{:<{}}  {:>5}  {:>8}  {:>8}  {:>8}\n", "group", width, "cases", "MAPE", "r",
                     "r(log)");
  for (const GroupStats& s : stats)
    out += fmt::format("{:<{}}  {:>5}  {:>7.1f}%  {:>8}  {:>8}\n", s.group, width, s.n,
                       s.mape_percent, s.r ? fmt::format("{:.3f}", *s.r) : "-",
                       s.r_log ? fmt::format("{:.3f}", *s.r_log) : "-");
  return out;
}

std::string correlation_plot_html(const std::vector<CaseResult>& results,
                                  const std::vector<GroupStats>& stats,
                                  const std::string& chartjs) {
  static const char* colors[] = {"#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f"};
  nlohmann::json datasets = nlohmann::json::array();
  double lo = 1e300, hi = 0;
  for (size_t g = 0; g + 1 < stats.size(); ++g) {
    nlohmann::json points = nlohmann::json::array();
    for (const CaseResult& r : results) {
      if (r.c.group != stats[g].group) continue;
      points.push_back({{"x", r.c.measured_ns}, {"y", r.simulated_ns}, {"label", r.c.name}});
      lo = std::min({lo, r.c.measured_ns, r.simulated_ns});
      hi = std::max({hi, r.c.measured_ns, r.simulated_ns});
    }
    const char* color = colors[g % std::size(colors)];
    datasets.push_back({{"label", stats[g].group},
                        {"data", points},
                        {"backgroundColor", color},
                        {"borderColor", color},
                        {"pointRadius", 5}});
  }
  datasets.push_back({{"label", "simulated = measured"},
                      {"type", "line"},
                      {"data", {{{"x", lo / 2}, {"y", lo / 2}}, {{"x", hi * 2}, {"y", hi * 2}}}},
                      {"borderColor", "#9e9e9e"},
                      {"borderDash", {6, 4}},
                      {"pointRadius", 0}});
  std::string rows;
  for (const CaseResult& r : results)
    rows += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{:+.1f}%"
        "</td><td>{}</td></tr>\n",
        html_escape(r.c.group), html_escape(r.c.name), fixed(r.simulated_ns),
        fixed(r.c.measured_ns), 100 * r.error(), html_escape(r.c.source));
  std::string groups;
  for (const GroupStats& s : stats)
    groups += fmt::format(
        "<tr><td>{}</td><td class=n>{}</td><td class=n>{:.1f}%</td><td "
        "class=n>{}</td><td class=n>{}</td></tr>\n",
        html_escape(s.group), s.n, s.mape_percent, s.r ? fmt::format("{:.3f}", *s.r) : "-",
        s.r_log ? fmt::format("{:.3f}", *s.r_log) : "-");
  std::string data = datasets.dump();
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3)
    data.replace(at, 2, "<\\/");
  return fmt::format(
      R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>neuronsim correlation</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:.85em}}
td,th{{padding:.15em .6em;border-bottom:1px solid #eee;text-align:left}} td.n{{text-align:right}}
#plot{{width:640px;height:640px}}</style>
<script>{}</script></head>
<body><h1>Simulated against measured</h1>
<div id="plot"><canvas id="scatter"></canvas></div>
<h2>Groups</h2><table><tr><th>group</th><th>cases</th><th>MAPE</th><th>r</th><th>r (log)</th></tr>
{}</table>
<h2>Cases</h2><table><tr><th>group</th><th>case</th><th>simulated (ns)</th><th>measured (ns)</th><th>error</th><th>source</th></tr>
{}</table>
<script>
new Chart(document.getElementById("scatter"), {{
  type: "scatter",
  data: {{ datasets: {} }},
  options: {{
    animation: false, responsive: true, maintainAspectRatio: false,
    scales: {{
      x: {{ type: "logarithmic", title: {{ display: true, text: "measured (ns)" }} }},
      y: {{ type: "logarithmic", title: {{ display: true, text: "simulated (ns)" }} }}
    }},
    plugins: {{ tooltip: {{ callbacks: {{ label: (c) => `${{c.raw.label || ""}}: measured ${{c.raw.x}} ns, simulated ${{c.raw.y}} ns` }} }} }}
  }}
}});
document.body.dataset.rendered = "1";
</script></body></html>
)html",
      chartjs, groups, rows, data);
}

double simulate_case(const CorrelationCase& c, const fs::path& case_dir, const fs::path& neuron_sim,
                     const fs::path& scratch, const fs::path& configs) {
  fs::create_directories(scratch);
  const fs::path out = scratch / "metrics.json", log = scratch / "log.txt";
  fs::remove(out);
  const std::string ns = shell_quoted(neuron_sim.string());
  std::string command;
  if (!configs.empty())
    command = fmt::format("export NEURONSIM_CONFIG_DIR={}; ",
                          shell_quoted(fs::absolute(configs).string()));
  if (c.kind == "cc") {
    command += fmt::format("{} cc-bench {} --timing-only --metrics {}", ns, c.spec,
                           shell_quoted(out.string()));
  } else if (c.kind == "nki") {
    // A path is taken from where neuron-sim runs; the cases run in their file's folder.
    const char* set = std::getenv("NEURONSIM_PYTHON");
    std::string python = set && *set ? set : "python3";
    if (python.find('/') != std::string::npos) python = fs::absolute(python).string();
    command += fmt::format("{} -m neuronsim.tools.calibration {} --metrics {}",
                           shell_quoted(python), c.spec, shell_quoted(out.string()));
  } else {
    std::istringstream words(c.spec);
    std::string program, rest, w;
    words >> program;
    while (words >> w) rest += " " + w;
    std::string neff = program;
    if (c.kind == "asm") {
      neff = (scratch / "case.neff").string();
      command += fmt::format("{} asm {} -o {} && ", ns, shell_quoted(program), shell_quoted(neff));
    }
    command += fmt::format("{} run {} --random-inputs -q --metrics {}{}", ns, shell_quoted(neff),
                           shell_quoted(out.string()), rest);
  }
  const std::string name = fmt::format("case {}/{} (line {})", c.group, c.name, c.line);
  if (const int status = run_shell(command, case_dir, log); status != 0 || !fs::exists(out))
    throw CorrelationError(fmt::format("{}: {} failed (exit status {}):\n{}", name, command, status,
                                       tail_of_file(log, 20)));
  std::vector<double> found;
  for (const Measurement& m : read_figures(out, "case"))
    if (m.metric == c.metric) found.push_back(m.value);
  if (found.size() != 1)
    throw CorrelationError(
        fmt::format("{}: the run has {} figures named {} (a cc case must give one size: -b X -e X)",
                    name, found.size(), c.metric));
  const auto ends = [&](const char* tail) {
    const std::string t = tail;
    return c.metric.size() >= t.size() &&
           c.metric.compare(c.metric.size() - t.size(), t.size(), t) == 0;
  };
  if (!ends("_ns") && !ends("_us"))
    throw CorrelationError(fmt::format("{}: metric {} is not a time (_ns or _us)", name, c.metric));
  if (!(found[0] > 0))
    throw CorrelationError(
        fmt::format("{}: simulated {} is {}: nothing to compare", name, c.metric, found[0]));
  return found[0] * (ends("_us") ? 1e3 : 1) / c.per;
}

}  // namespace neuronsim::bench
