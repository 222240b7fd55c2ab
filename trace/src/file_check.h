// Checks that a file is a readable tracerun trace before anything trusts it: exists, is SQLite,
// is not truncated, has the meta table, magic and a schema version this build reads. Private to
// trace/; it does not check completeness (callers decide whether an open shard is acceptable).
#pragma once

#include <map>
#include <string>

#include "sqlite_util.h"

namespace tracerun::trace::filecheck {

// File-level checks that need no SQLite: missing, not a regular file, empty, not SQLite,
// corrupted header, truncated (size not a whole number of pages or shorter than the header's
// page count; with a committed -wal beside it, some page of the WAL's last commit in neither
// file). Throws TraceError("<path>: <problem>").
void checkFile(const std::string& path);

// Reads the meta table of an open database and checks magic and schema version (meta and
// PRAGMA user_version). Throws TraceError("<path>: <problem>"). Returns every meta row.
std::map<std::string, std::string> readTraceMeta(const sql::Db& db);

// A one-line description of what an SQLite error code means for a trace file ("corrupted",
// "not an SQLite database"...), for messages built from a failed call.
std::string describeSqliteError(int code);

}  // namespace tracerun::trace::filecheck
