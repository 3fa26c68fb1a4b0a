// The benchmark history (history.h) over SQLite's C API.
#include "history.h"

#include <filesystem>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <sqlite3.h>

namespace neuronsim::bench {
namespace {

constexpr int kApplicationId = 0x4e534248;  // "NSBH": a neuronsim benchmark history
constexpr int kSchemaVersion = 2;

using Db = std::unique_ptr<sqlite3, decltype(&sqlite3_close)>;
using Statement = std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)>;

[[noreturn]] void fail(const std::string& path, sqlite3* db, const std::string& doing) {
  throw HistoryError(fmt::format("{}: {}: {}", path, doing, db ? sqlite3_errmsg(db) : "no memory"));
}

Db open(const std::string& path, bool create) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  Db db(nullptr, &sqlite3_close);
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  db.reset(raw);
  if (rc != SQLITE_OK) fail(path, raw, "cannot open the history");
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

void exec(const std::string& path, sqlite3* db, const char* sql, const std::string& doing) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(path, db, doing);
}

// The integer a one-value query gives.
int scalar(const std::string& path, sqlite3* db, const std::string& sql) {
  Statement st(nullptr, &sqlite3_finalize);
  sqlite3_stmt* raw = nullptr;
  // Reading the first page is where SQLite finds out that a file is not a database.
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK)
    fail(path, db, "not a readable SQLite database");
  st.reset(raw);
  if (sqlite3_step(raw) != SQLITE_ROW) fail(path, db, "not a readable SQLite database");
  return sqlite3_column_int(raw, 0);
}

void create_artifacts_table(const std::string& path, sqlite3* db) {
  exec(path, db,
       fmt::format("CREATE TABLE artifacts (run INTEGER NOT NULL REFERENCES runs(id), benchmark "
                   "TEXT NOT NULL, name TEXT NOT NULL, content BLOB NOT NULL, PRIMARY KEY (run, "
                   "benchmark, name)); PRAGMA user_version = {};",
                   kSchemaVersion)
           .c_str(),
       "cannot create the history's artifacts table");
}

// A new database gets the schema; an existing one must be a history this version reads (a
// version-1 history is upgraded when written to).
void check_or_create_schema(const std::string& path, sqlite3* db, bool writing) {
  const int app = scalar(path, db, "PRAGMA application_id");
  const int version = scalar(path, db, "PRAGMA user_version");
  const int tables = scalar(path, db, "SELECT count(*) FROM sqlite_master");
  if (app == 0 && version == 0 && tables == 0) {
    exec(path, db,
         "CREATE TABLE runs (id INTEGER PRIMARY KEY, commit_id TEXT NOT NULL, date TEXT NOT NULL,"
         " machine TEXT NOT NULL, source TEXT NOT NULL);"
         "CREATE TABLE results (run INTEGER NOT NULL REFERENCES runs(id), benchmark TEXT NOT "
         "NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,"
         " PRIMARY KEY (run, benchmark, metric));",
         "cannot create the history's tables");
    create_artifacts_table(path, db);
    exec(path, db, fmt::format("PRAGMA application_id = {};", kApplicationId).c_str(),
         "cannot mark the history");
    return;
  }
  if (app != kApplicationId)
    throw HistoryError(fmt::format(
        "{}: an SQLite database, but not a neuronsim benchmark history (application_id {:#x})",
        path, static_cast<unsigned>(app)));
  if (version == 1 && writing) {  // version 2 added the artifacts table, nothing else
    create_artifacts_table(path, db);
    return;
  }
  if (version == 1) return;  // readable as it is: it has no artifacts
  if (version != kSchemaVersion)
    throw HistoryError(fmt::format("{}: history schema version {}, this neuron-sim reads {}", path,
                                   version, kSchemaVersion));
}

Statement prepare(const std::string& path, sqlite3* db, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK)
    fail(path, db, "cannot prepare a statement");
  return Statement(raw, &sqlite3_finalize);
}

void bind_text(sqlite3_stmt* st, int index, const std::string& text) {
  sqlite3_bind_text(st, index, text.c_str(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* st, int index) {
  const unsigned char* t = sqlite3_column_text(st, index);
  return t ? reinterpret_cast<const char*>(t) : "";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Db open_existing(const std::string& path) {
  if (!std::filesystem::exists(path)) throw HistoryError(fmt::format("{}: no such history", path));
  Db db = open(path, false);
  check_or_create_schema(path, db.get(), false);
  return db;
}

}  // namespace

std::string unit_of(const std::string& metric) {
  static const std::pair<const char*, const char*> suffixes[] = {
      {"_bytes_per_ns", "bytes/ns"},
      {"_elems_per_cycle", "elems/cycle"},
      {"_per_cycle", "1/cycle"},
      {"_per_instruction", "cycles/instruction"},
      {"_gib_per_s", "GiB/s"},
      {"_tokens_per_s", "tokens/s"},
      {"_tflops", "TFLOP/s"},
      {"_percent", "%"},
      {"_ns", "ns"},
      {"_us", "us"},
      {"_ps", "ps"},
      {"_bytes", "bytes"},
      {"_cycles", "cycles"},
      {"_flops", "FLOP"},
      {"_GBps", "GB/s"},
      {"bw", "GiB/s"},  // cc-bench's algbw and busbw
      {"_share", "1"},
      {"fraction_of_peak", "1"},
  };
  for (const auto& [tail, unit] : suffixes)
    if (ends_with(metric, tail)) return unit;
  if (metric.find("_us_") != std::string::npos) return "us";
  if (metric == "flops") return "FLOP";
  return "count";
}

int64_t record_run(const std::string& path, const RunInfo& info,
                   const std::vector<Measurement>& figures,
                   const std::vector<Artifact>& artifacts) {
  const bool fresh = !std::filesystem::exists(path);
  Db db = open(path, fresh);
  exec(path, db.get(), "BEGIN IMMEDIATE", "cannot start a transaction");
  try {
    check_or_create_schema(path, db.get(), true);
    Statement run = prepare(path, db.get(),
                            "INSERT INTO runs (commit_id, date, machine, source) VALUES (?,?,?,?)");
    bind_text(run.get(), 1, info.commit);
    bind_text(run.get(), 2, info.date);
    bind_text(run.get(), 3, info.machine);
    bind_text(run.get(), 4, info.source);
    if (sqlite3_step(run.get()) != SQLITE_DONE) fail(path, db.get(), "cannot add the run");
    const int64_t id = sqlite3_last_insert_rowid(db.get());
    Statement row =
        prepare(path, db.get(),
                "INSERT INTO results (run, benchmark, metric, value, unit) VALUES (?,?,?,?,?)");
    for (const Measurement& m : figures) {
      sqlite3_reset(row.get());
      sqlite3_bind_int64(row.get(), 1, id);
      bind_text(row.get(), 2, m.benchmark);
      bind_text(row.get(), 3, m.metric);
      sqlite3_bind_double(row.get(), 4, m.value);
      bind_text(row.get(), 5, m.unit.empty() ? unit_of(m.metric) : m.unit);
      if (sqlite3_step(row.get()) != SQLITE_DONE)
        fail(path, db.get(), fmt::format("cannot add {} {}", m.benchmark, m.metric));
    }
    Statement file = prepare(
        path, db.get(), "INSERT INTO artifacts (run, benchmark, name, content) VALUES (?,?,?,?)");
    for (const Artifact& a : artifacts) {
      sqlite3_reset(file.get());
      sqlite3_bind_int64(file.get(), 1, id);
      bind_text(file.get(), 2, a.benchmark);
      bind_text(file.get(), 3, a.name);
      sqlite3_bind_blob64(file.get(), 4, a.content.data(), a.content.size(), SQLITE_TRANSIENT);
      if (sqlite3_step(file.get()) != SQLITE_DONE)
        fail(path, db.get(), fmt::format("cannot add {}'s {}", a.benchmark, a.name));
    }
    exec(path, db.get(), "COMMIT", "cannot commit the run");
    return id;
  } catch (...) {
    sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<RecordedFigure> read_history(const std::string& path) {
  Db db = open_existing(path);
  Statement st = prepare(path, db.get(),
                         "SELECT r.id, r.commit_id, r.date, r.machine, r.source, s.benchmark, "
                         "s.metric, s.value, s.unit FROM results s JOIN runs r ON r.id = s.run "
                         "ORDER BY r.id, s.benchmark, s.metric");
  std::vector<RecordedFigure> out;
  int rc = 0;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    RecordedFigure f;
    f.run = sqlite3_column_int64(st.get(), 0);
    f.info = {column_text(st.get(), 1), column_text(st.get(), 2), column_text(st.get(), 3),
              column_text(st.get(), 4)};
    f.benchmark = column_text(st.get(), 5);
    f.metric = column_text(st.get(), 6);
    f.value = sqlite3_column_double(st.get(), 7);
    f.unit = column_text(st.get(), 8);
    out.push_back(std::move(f));
  }
  if (rc != SQLITE_DONE) fail(path, db.get(), "cannot read the history");
  return out;
}

std::vector<RecordedRun> read_runs(const std::string& path) {
  Db db = open_existing(path);
  Statement st =
      prepare(path, db.get(), "SELECT id, commit_id, date, machine, source FROM runs ORDER BY id");
  std::vector<RecordedRun> out;
  int rc = 0;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW)
    out.push_back({sqlite3_column_int64(st.get(), 0),
                   {column_text(st.get(), 1), column_text(st.get(), 2), column_text(st.get(), 3),
                    column_text(st.get(), 4)}});
  if (rc != SQLITE_DONE) fail(path, db.get(), "cannot read the history's runs");
  return out;
}

std::vector<Artifact> read_artifacts(const std::string& path, int64_t run) {
  Db db = open_existing(path);
  if (scalar(path, db.get(), "PRAGMA user_version") < 2) return {};
  Statement st = prepare(
      path, db.get(),
      "SELECT benchmark, name, content FROM artifacts WHERE run = ? ORDER BY benchmark, name");
  sqlite3_bind_int64(st.get(), 1, run);
  std::vector<Artifact> out;
  int rc = 0;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    const auto* data = static_cast<const char*>(sqlite3_column_blob(st.get(), 2));
    out.push_back(
        {column_text(st.get(), 0), column_text(st.get(), 1),
         std::string(data ? data : "", static_cast<size_t>(sqlite3_column_bytes(st.get(), 2)))});
  }
  if (rc != SQLITE_DONE) fail(path, db.get(), "cannot read the history's artifacts");
  return out;
}

}  // namespace neuronsim::bench
