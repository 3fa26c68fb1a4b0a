#include "expected.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace neuronsim::bench {
namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

// A finite double spelled completely by `text`, or nothing.
std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool is_comment(std::string_view line) {
  const std::string_view t = trim(line);
  return t.empty() || t.front() == '#';
}

using Key = std::pair<std::string, std::string>;

void check_name(std::string_view what, std::string_view name) {
  if (name.empty() || name.find_first_of(",\n\r") != std::string_view::npos || trim(name) != name)
    throw std::invalid_argument(
        fmt::format("{} '{}' cannot be written to CSV (empty, comma, newline or "
                    "surrounding spaces)",
                    what, name));
}

// The run by (benchmark, metric); throws on duplicates.
std::map<Key, double> index_run(const std::vector<Measurement>& run) {
  std::map<Key, double> out;
  for (const Measurement& m : run)
    if (!out.emplace(Key{m.benchmark, m.metric}, m.value).second)
      throw std::invalid_argument(
          fmt::format("the run measured {} {} twice", m.benchmark, m.metric));
  return out;
}

}  // namespace

bool Margin::admits(double expected, double actual) const {
  const double diff = std::fabs(actual - expected);
  if (std::isnan(diff)) return false;
  return kind == Kind::absolute ? diff <= value : diff <= value * std::fabs(expected);
}

std::string Margin::text() const {
  return kind == Kind::absolute ? "abs:" + format_value(value) : format_value(value);
}

Margin parse_margin(std::string_view text) {
  std::string_view t = trim(text);
  Margin m;
  constexpr std::string_view kAbs = "abs:";
  if (t.substr(0, kAbs.size()) == kAbs) {
    m.kind = Margin::Kind::absolute;
    t.remove_prefix(kAbs.size());
  }
  const std::optional<double> v = parse_number(trim(t));
  if (!v)
    throw std::invalid_argument(
        fmt::format("margin '{}' is neither a relative tolerance (0.001) nor an "
                    "absolute one (abs:5)",
                    text));
  if (*v < 0) throw std::invalid_argument(fmt::format("margin '{}' is negative", text));
  m.value = *v;
  return m;
}

const ExpectedRow* ExpectedFile::find(std::string_view benchmark, std::string_view metric) const {
  for (const ExpectedRow& r : rows)
    if (r.benchmark == benchmark && r.metric == metric) return &r;
  return nullptr;
}

ExpectedFile parse_expected(std::string_view text, const std::string& source) {
  ExpectedFile file;
  bool header = false;
  std::map<Key, size_t> seen;  // -> line
  size_t line_no = 0;
  std::vector<std::string_view> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  for (std::string_view raw : lines) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const auto fail = [&](const std::string& what) {
      return ExpectedFileError(fmt::format("{}:{}: {}", source, line_no, what));
    };
    if (is_comment(raw)) {
      if (!header) file.preamble.emplace_back(raw);
      continue;
    }
    std::vector<std::string_view> fields = split(raw, ',');
    for (std::string_view& f : fields) f = trim(f);
    if (!header) {
      const std::vector<std::string_view> want = split(kExpectedHeader, ',');
      if (fields != want)
        throw fail(fmt::format("expected the header '{}', found '{}'", kExpectedHeader, trim(raw)));
      header = true;
      continue;
    }
    if (fields.size() != 4)
      throw fail(fmt::format("expected 4 fields ({}), found {}: '{}'", kExpectedHeader,
                             fields.size(), trim(raw)));
    ExpectedRow row;
    row.line = line_no;
    row.benchmark = std::string(fields[0]);
    row.metric = std::string(fields[1]);
    if (row.benchmark.empty()) throw fail("empty benchmark name");
    if (row.metric.empty()) throw fail("empty metric name");
    const std::optional<double> value = parse_number(fields[2]);
    if (!value) throw fail(fmt::format("value '{}' is not a finite number", fields[2]));
    row.value = *value;
    if (fields[3].empty()) throw fail("missing margin (write e.g. 0.001 or abs:0)");
    try {
      row.margin = parse_margin(fields[3]);
    } catch (const std::invalid_argument& e) {
      throw fail(e.what());
    }
    row.margin_text = std::string(fields[3]);
    const auto [it, fresh] = seen.emplace(Key{row.benchmark, row.metric}, line_no);
    if (!fresh)
      throw fail(fmt::format("duplicate row {} {} (first on line {})", row.benchmark, row.metric,
                             it->second));
    file.rows.push_back(std::move(row));
  }
  if (!header)
    throw ExpectedFileError(fmt::format("{}: no header line '{}'", source, kExpectedHeader));
  return file;
}

ExpectedFile read_expected(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExpectedFileError(fmt::format("{}: cannot open for reading", path.string()));
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (in.bad()) throw ExpectedFileError(fmt::format("{}: read error", path.string()));
  return parse_expected(text, path.string());
}

double relative_difference(double expected, double actual) {
  if (actual == expected) return 0.0;
  if (expected == 0.0)
    return actual > 0 ? std::numeric_limits<double>::infinity()
                      : -std::numeric_limits<double>::infinity();
  return (actual - expected) / std::fabs(expected);
}

CheckReport check(const ExpectedFile& expected, const std::vector<Measurement>& run) {
  const std::map<Key, double> actual = index_run(run);
  CheckReport report;
  for (const ExpectedRow& row : expected.rows) {
    RowOutcome out;
    out.expected = row;
    const auto it = actual.find(Key{row.benchmark, row.metric});
    if (it == actual.end()) {
      out.status = RowOutcome::Status::missing;
    } else {
      out.actual = it->second;
      out.status = row.margin.admits(row.value, out.actual) ? RowOutcome::Status::pass
                                                            : RowOutcome::Status::out_of_margin;
    }
    (out.status == RowOutcome::Status::pass ? report.passed : report.failed) += 1;
    report.rows.push_back(std::move(out));
  }
  for (const Measurement& m : run)
    if (!expected.find(m.benchmark, m.metric)) report.not_gated.push_back(m);
  return report;
}

std::string format_report(const CheckReport& report) {
  std::string out;
  for (const RowOutcome& r : report.rows) {
    const ExpectedRow& e = r.expected;
    switch (r.status) {
      case RowOutcome::Status::pass:
        break;
      case RowOutcome::Status::out_of_margin:
        out += fmt::format(
            "FAIL {} {}: expected {}, actual {}, difference {:.7g} ({:+.4g}%), margin {} (line "
            "{})\n",
            e.benchmark, e.metric, format_value(e.value), format_value(r.actual),
            r.actual - e.value, relative_difference(e.value, r.actual) * 100.0,
            e.margin_text.empty() ? e.margin.text() : e.margin_text, e.line);
        break;
      case RowOutcome::Status::missing:
        out += fmt::format("FAIL {} {}: expected {}, missing from this run (line {})\n",
                           e.benchmark, e.metric, format_value(e.value), e.line);
        break;
    }
  }
  for (const Measurement& m : report.not_gated)
    out += fmt::format("not gated: {} {} = {} (not in the expected file)\n", m.benchmark, m.metric,
                       format_value(m.value));
  if (!report.not_gated.empty()) out += fmt::format("{} not gated\n", report.not_gated.size());
  out += fmt::format("{} passed, {} failed\n", report.passed, report.failed);
  return out;
}

std::string format_value(double value) {
  if (value == 0.0) return "0";  // also -0
  return fmt::format("{}", value);
}

std::string results_csv(const std::vector<Measurement>& run) {
  index_run(run);  // refuses duplicates
  std::string out = std::string(kResultsHeader) + "\n";
  for (const Measurement& m : run) {
    check_name("benchmark", m.benchmark);
    check_name("metric", m.metric);
    out += fmt::format("{},{},{}\n", m.benchmark, m.metric, format_value(m.value));
  }
  return out;
}

std::string updated_expected(const std::optional<ExpectedFile>& existing,
                             const std::vector<Measurement>& run, const Margin& default_margin,
                             UpdateSummary* summary) {
  index_run(run);  // refuses duplicates
  UpdateSummary local;
  UpdateSummary& sum = summary ? *summary : local;
  sum = {};
  std::string out;
  if (existing && !existing->preamble.empty()) {
    for (const std::string& line : existing->preamble) out += line + "\n";
  } else {
    out +=
        "# Expected results of `neuron-sim bench`: simulated figures, identical on every machine.\n"
        "# margin: relative tolerance (0.001 = 0.1 %) or absolute with the prefix abs: (abs:0 = "
        "exact).\n"
        "# Regenerate with `neuron-sim bench --update bench/expected_results.csv` (margins are "
        "kept);\n"
        "# a commit that changes an expected value or margin must give the reason for it "
        "(bench/README.md).\n";
  }
  out += std::string(kExpectedHeader) + "\n";
  for (const Measurement& m : run) {
    check_name("benchmark", m.benchmark);
    check_name("metric", m.metric);
    std::string margin = default_margin.text();
    const ExpectedRow* old = existing ? existing->find(m.benchmark, m.metric) : nullptr;
    if (old) {
      margin = old->margin_text.empty() ? old->margin.text() : old->margin_text;
      ++sum.kept;
      if (old->value != m.value) ++sum.changed;
    } else {
      sum.added.push_back(m);
    }
    out += fmt::format("{},{},{},{}\n", m.benchmark, m.metric, format_value(m.value), margin);
  }
  if (existing) {
    const std::map<Key, double> now = index_run(run);
    for (const ExpectedRow& r : existing->rows)
      if (!now.count(Key{r.benchmark, r.metric})) sum.removed.push_back(r);
  }
  return out;
}

}  // namespace neuronsim::bench
