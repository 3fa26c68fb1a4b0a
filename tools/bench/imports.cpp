// Reading other tools' figures (imports.h).
#include "imports.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace neuronsim::bench {
namespace {

std::vector<Measurement> from_metrics_json(const nlohmann::json& doc, const std::string& file,
                                           const std::string& benchmark) {
  const auto metrics = doc.find("metrics");
  if (metrics == doc.end() || !metrics->is_array())
    throw ImportError(fmt::format("{}: JSON without a \"metrics\" list: not a metrics file", file));
  std::vector<Measurement> out;
  for (size_t i = 0; i < metrics->size(); ++i) {
    const nlohmann::json& m = (*metrics)[i];
    const std::string where = fmt::format("{}: metrics[{}]", file, i);
    if (!m.is_object() || !m.contains("name") || !m["name"].is_string())
      throw ImportError(fmt::format("{}: no \"name\"", where));
    const std::string name = m["name"];
    if (!m.contains("value") || !m["value"].is_number())
      throw ImportError(fmt::format("{} ({}): \"value\" is not a number", where, name));
    Measurement f;
    const size_t slash = name.rfind('/');
    if (slash == std::string::npos) {
      if (benchmark.empty())
        throw ImportError(fmt::format(
            "{} ({}): the name says no benchmark; give one (--benchmark NAME)", where, name));
      f.benchmark = benchmark;
      f.metric = name;
    } else {
      f.benchmark = name.substr(0, slash);
      f.metric = name.substr(slash + 1);
    }
    f.value = m["value"].get<double>();
    if (m.contains("unit") && m["unit"].is_string()) f.unit = m["unit"];
    out.push_back(std::move(f));
  }
  return out;
}

// benchmark,metric,value[,margin]: a run's CSV or an expected file.
std::vector<Measurement> from_csv(const std::string& text, const std::string& file) {
  if (text.find(kExpectedHeader) != std::string::npos) {
    std::vector<Measurement> out;
    for (const ExpectedRow& r : parse_expected(text, file).rows)
      out.push_back({r.benchmark, r.metric, r.value});
    return out;
  }
  std::istringstream in(text);
  std::string line;
  std::vector<Measurement> out;
  size_t number = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kResultsHeader)
        throw ImportError(fmt::format("{}:{}: expected the header '{}' or '{}'", file, number,
                                      kResultsHeader, kExpectedHeader));
      header = true;
      continue;
    }
    const size_t a = line.find(','), b = line.find(',', a + 1);
    if (a == std::string::npos || b == std::string::npos ||
        line.find(',', b + 1) != std::string::npos)
      throw ImportError(fmt::format("{}:{}: expected benchmark,metric,value", file, number));
    const std::string value = line.substr(b + 1);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size())
      throw ImportError(fmt::format("{}:{}: value '{}' is not a number", file, number, value));
    out.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), v});
  }
  if (!header)
    throw ImportError(fmt::format("{}: no figures (no '{}' header)", file, kResultsHeader));
  return out;
}

}  // namespace

std::vector<Measurement> read_figures(const std::filesystem::path& file,
                                      const std::string& benchmark) {
  const std::string name = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ImportError(fmt::format("{}: cannot read", name));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw ImportError(fmt::format("{}: not valid JSON: {}", name, e.what()));
    }
    return from_metrics_json(doc, name, benchmark);
  }
  try {
    return from_csv(text, name);
  } catch (const ExpectedFileError& e) {
    throw ImportError(e.what());
  }
}

}  // namespace neuronsim::bench
