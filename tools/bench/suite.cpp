// The benchmark suite (suite.h).
#include "suite.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "imports.h"
#include "shell.h"

namespace neuronsim::bench {
namespace {

namespace fs = std::filesystem;

std::string required_text(const nlohmann::json& e, const char* key, const std::string& where) {
  if (!e.contains(key) || !e[key].is_string() || e[key].get<std::string>().empty())
    throw SuiteError(fmt::format("{}: \"{}\" must be a non-empty string", where, key));
  return e[key];
}

}  // namespace

Suite read_suite(const fs::path& file) {
  const std::string name = file.string();
  std::ifstream in(file);
  if (!in) throw SuiteError(fmt::format("{}: cannot read the suite", name));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw SuiteError(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    throw SuiteError(fmt::format("{}: expected an object with a \"benchmarks\" list", name));
  Suite suite{file, fs::absolute(file).parent_path().parent_path(), {}};
  std::set<std::string> names;
  for (size_t i = 0; i < doc["benchmarks"].size(); ++i) {
    const nlohmann::json& e = doc["benchmarks"][i];
    const std::string where = fmt::format("{}: benchmarks[{}]", name, i);
    if (!e.is_object()) throw SuiteError(fmt::format("{}: not an object", where));
    SuiteEntry entry;
    entry.name = required_text(e, "name", where);
    const std::string named = fmt::format("{} ({})", where, entry.name);
    entry.command = required_text(e, "command", named);
    entry.description = e.value("description", "");
    entry.benchmark = e.value("benchmark", entry.name);
    if (e.contains("labels")) {
      if (!e["labels"].is_array())
        throw SuiteError(fmt::format("{}: \"labels\" must be a list", named));
      for (const auto& l : e["labels"]) {
        if (!l.is_string()) throw SuiteError(fmt::format("{}: labels must be strings", named));
        entry.labels.push_back(l);
      }
    }
    if (entry.command.find("{out}") == std::string::npos)
      throw SuiteError(
          fmt::format("{}: the command never writes {{out}}, so it yields no figure", named));
    if (!names.insert(entry.name).second)
      throw SuiteError(fmt::format("{}: a second benchmark named {}", where, entry.name));
    suite.entries.push_back(std::move(entry));
  }
  return suite;
}

bool SuiteSelection::selected(const SuiteEntry& e) const {
  if (!filter.empty() && e.name.find(filter) == std::string::npos) return false;
  for (const std::string& l : e.labels)
    if (std::find(skip_labels.begin(), skip_labels.end(), l) != skip_labels.end()) return false;
  return true;
}

SuiteResult run_suite(const Suite& suite, const SuiteSelection& selection, const SuiteTools& tools,
                      const std::function<void(const std::string&)>& progress) {
  std::vector<const SuiteEntry*> chosen;
  for (const SuiteEntry& e : suite.entries)
    if (selection.selected(e)) chosen.push_back(&e);
  if (chosen.empty())
    throw SuiteError(fmt::format("{}: no benchmark selected", suite.file.string()));

  SuiteResult result;
  const ScratchDir scratch_dir("neuronsim-suite");
  const fs::path& scratch = scratch_dir.path();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const SuiteEntry& e = *chosen[i];
    const fs::path tmp = scratch / std::to_string(i);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path out = tmp / "figures", trace = tmp / "trace.json", log = tmp / "log.txt";
    const std::string command =
        expand_placeholders(e.command, {{"neuron_sim", shell_quoted(tools.neuron_sim.string())},
                                        {"make_kernels", shell_quoted(tools.make_kernels.string())},
                                        {"python", shell_quoted(tools.python.string())},
                                        {"out", shell_quoted(out.string())},
                                        {"trace", shell_quoted(trace.string())},
                                        {"tmp", shell_quoted(tmp.string())}});
    progress(fmt::format("[{}/{}] {}: {}", i + 1, chosen.size(), e.name,
                         e.description.empty() ? command : e.description));
    const auto start = std::chrono::steady_clock::now();
    const int status = run_shell(command, suite.root, log);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != 0 || !fs::exists(out))
      throw SuiteError(fmt::format(
          "benchmark {} failed ({}): {}\n{}", e.name,
          status != 0 ? fmt::format("exit status {}", status) : "no figures written to {out}",
          command, tail_of_file(log, 30)));
    std::vector<Measurement> figures = read_figures(out, e.benchmark);
    if (fs::exists(trace))
      result.artifacts.push_back({e.benchmark, "trace.json", read_text(trace)});
    progress(fmt::format("      {} figures in {:.1f} s", figures.size(), seconds));
    result.figures.insert(result.figures.end(), figures.begin(), figures.end());
  }
  return result;
}

}  // namespace neuronsim::bench
