// Fitting the free figures of the chip configurations on a calibration set (fit.h).
#include "fit.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shell.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;

// The end of the JSON value that starts at `at` (one past its last character).
size_t value_end(const std::string& t, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      if (!in_string && depth == 0) return i + 1;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (c == ',' || c == '\n')) {
      return i;
    }
  }
  return t.size();
}

// The position of member `key`'s value in the object that starts at `object` ('{').
size_t member_value(const std::string& t, size_t object, const std::string& key) {
  const std::string quoted = nlohmann::json(key).dump();
  size_t i = object + 1;
  const size_t end = value_end(t, object);
  while (i < end) {
    i = t.find_first_not_of(" \t\r\n,", i);
    if (i == std::string::npos || i >= end - 1) break;
    const size_t key_end = value_end(t, i);
    const bool match = t.compare(i, key_end - i, quoted) == 0;
    const size_t value = t.find_first_not_of(" \t\r\n:", key_end);
    if (match) return value;
    i = value_end(t, value);
  }
  return std::string::npos;
}

std::vector<std::string> pointer_keys(const std::string& pointer) {
  std::vector<std::string> keys;
  std::string key;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      std::string k;
      for (size_t j = 0; j < key.size(); ++j) {  // JSON pointer escapes: ~1 is /, ~0 is ~
        if (key[j] == '~' && j + 1 < key.size())
          k += key[++j] == '1' ? '/' : '~';
        else
          k += key[j];
      }
      keys.push_back(k);
      key.clear();
    } else {
      key += pointer[i];
    }
  }
  return keys;
}

double golden_search(double lo, double hi, const std::function<double(double)>& cost) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = std::log(lo), b = std::log(hi);
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = cost(std::exp(c)), fd = cost(std::exp(d));
  while (b - a > std::log(1.005)) {
    if (fc <= fd) {
      b = d, d = c, fd = fc;
      c = b - phi * (b - a), fc = cost(std::exp(c));
    } else {
      a = c, c = d, fc = fd;
      d = a + phi * (b - a), fd = cost(std::exp(d));
    }
  }
  return std::exp(fc <= fd ? c : d);
}

// Where, from `best` towards `limit`, the cost first exceeds `ceiling`: steps out from `best`
// by 1 %, 2 %, 4 %, ... of it, then bisects the last step (in log space).
double band_edge(double best, double limit, double ceiling,
                 const std::function<double(double)>& cost) {
  const double span = std::log(limit / best), sign = span < 0 ? -1 : 1;
  double inside = 0, outside = 0;
  for (double step = 0.01; outside == 0; step *= 2) {
    if (step >= std::abs(span)) {
      if (cost(limit) <= ceiling) return limit;
      outside = std::abs(span);
    } else if (cost(best * std::exp(sign * step)) > ceiling) {
      outside = step;
    } else {
      inside = step;
    }
  }
  for (int i = 0; i < 4; ++i) {
    const double mid = (inside + outside) / 2;
    (cost(best * std::exp(sign * mid)) <= ceiling ? inside : outside) = mid;
  }
  return best * std::exp(sign * inside);
}

}  // namespace

FreeFigure parse_free_figure(const std::string& text) {
  const size_t hash = text.find('#'), eq = text.find('='), dots = text.find("..");
  const auto bad = [&](const std::string& why) {
    return CorrelationError(
        fmt::format("--fit {}: {} (expected FILE#POINTER=LO..HI, e.g. "
                    "trn1.json#/dma_core_bytes_per_ns=50..368)",
                    text, why));
  };
  if (hash == std::string::npos || eq == std::string::npos || dots == std::string::npos ||
      !(hash < eq && eq < dots))
    throw bad("not of that form");
  FreeFigure f{text.substr(0, hash), text.substr(hash + 1, eq - hash - 1)};
  if (f.file.empty() || f.pointer.size() < 2 || f.pointer[0] != '/')
    throw bad("no file or pointer");
  try {
    size_t used = 0;
    const std::string lo = text.substr(eq + 1, dots - eq - 1), hi = text.substr(dots + 2);
    f.lo = std::stod(lo, &used);
    if (used != lo.size()) throw std::invalid_argument(lo);
    f.hi = std::stod(hi, &used);
    if (used != hi.size()) throw std::invalid_argument(hi);
  } catch (const std::exception&) {
    throw bad("the range is not two numbers");
  }
  if (!(f.lo > 0 && f.hi > f.lo)) throw bad("the range must be 0 < LO < HI");
  return f;
}

double figure_value(const fs::path& configs, const FreeFigure& f) {
  const fs::path file = configs / f.file;
  const nlohmann::json doc = nlohmann::json::parse(read_text(file), nullptr, false);
  if (doc.is_discarded()) throw CorrelationError(fmt::format("{}: not valid JSON", file.string()));
  const nlohmann::json::json_pointer pointer(f.pointer);
  if (!doc.contains(pointer) || !doc[pointer].is_object() || !doc[pointer].contains("value") ||
      !doc[pointer]["value"].is_number())
    throw CorrelationError(
        fmt::format("{}: {} is not a figure ({{\"value\": number, \"source\": ...}})",
                    file.string(), f.pointer));
  return doc[pointer]["value"].get<double>();
}

std::string replace_figure(const std::string& text, const std::string& pointer, double value,
                           const std::string& source, const std::string& where) {
  size_t at = text.find('{');
  for (const std::string& key : pointer_keys(pointer)) {
    if (at == std::string::npos || text[at] != '{')
      throw CorrelationError(fmt::format("{}: {} is not in the file", where, pointer));
    at = member_value(text, at, key);
  }
  if (at == std::string::npos || text[at] != '{')
    throw CorrelationError(fmt::format("{}: {} is not a figure object", where, pointer));
  // As the configurations write a figure: {"value": V, "source": "..."}.
  const std::string dumped =
      fmt::format("{{\"value\": {}, \"source\": {}}}", nlohmann::json(value).dump(),
                  nlohmann::json(source).dump());
  return text.substr(0, at) + dumped + text.substr(value_end(text, at));
}

void write_configs(const fs::path& configs, const fs::path& to,
                   const std::vector<FreeFigure>& figures, const std::vector<double>& values) {
  fs::create_directories(to);
  std::map<std::string, std::string> texts;
  for (const auto& entry : fs::directory_iterator(configs))
    if (entry.path().extension() == ".json")
      texts[entry.path().filename().string()] = read_text(entry.path());
  for (size_t i = 0; i < figures.size(); ++i) {
    auto it = texts.find(figures[i].file);
    if (it == texts.end())
      throw CorrelationError(
          fmt::format("{}: no such configuration", (configs / figures[i].file).string()));
    it->second = replace_figure(it->second, figures[i].pointer, values[i], "being fitted",
                                (configs / figures[i].file).string());
  }
  for (const auto& [name, text] : texts) {
    std::ofstream out(to / name, std::ios::binary);
    out << text;
    if (!out) throw CorrelationError(fmt::format("{}: cannot write", (to / name).string()));
  }
}

double mape_percent(const std::vector<CaseResult>& results) {
  double sum = 0;
  for (const CaseResult& r : results) sum += std::abs(r.error());
  return results.empty() ? 0 : 100 * sum / static_cast<double>(results.size());
}

FitResult fit_figures(const std::vector<FreeFigure>& figures, const std::vector<double>& start,
                      const Evaluate& evaluate) {
  FitResult r;
  r.before = r.after = start;
  std::map<std::vector<double>, double> seen;
  const auto cost_of = [&](const std::vector<double>& values) {
    if (auto it = seen.find(values); it != seen.end()) return it->second;
    ++r.evaluations;
    return seen[values] = mape_percent(evaluate(values));
  };
  r.cases_before = evaluate(start);
  r.mape_before = seen[start] = mape_percent(r.cases_before);
  ++r.evaluations;
  const int rounds = figures.size() > 1 ? 2 : 1;
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < figures.size(); ++i) {
      const auto along = [&](double v) {
        std::vector<double> values = r.after;
        values[i] = v;
        return cost_of(values);
      };
      const double found = golden_search(figures[i].lo, figures[i].hi, along);
      if (along(found) < cost_of(r.after)) r.after[i] = found;
    }
  }
  r.cases_after = evaluate(r.after);
  r.mape_after = mape_percent(r.cases_after);
  for (size_t i = 0; i < figures.size(); ++i) {
    const auto along = [&](double v) {
      std::vector<double> values = r.after;
      values[i] = v;
      return cost_of(values);
    };
    const double ceiling = r.mape_after + kBandPoints;
    r.bands.emplace_back(band_edge(r.after[i], figures[i].lo, ceiling, along),
                         band_edge(r.after[i], figures[i].hi, ceiling, along));
  }
  return r;
}

}  // namespace neuronsim::bench
