// Activation-tagged bytes (the capture's tag, memory_categories 'activation') live on rank 0 when
// the last step's first `backward` phase starts: allocated before, not freed in between (with one
// microbatch the step's only backward; in a pipeline when stage 0 holds the most microbatches).
// What the head's forward made is left out: the vocab-parallel cross-entropy's max ([s, b],
// all-reduced) is released when Gloo's worker drops the all-reduce's work, sometimes just after
// backward starts (a race of 4sb bytes, not a layer's). The one reading of the activation
// closed-form tests (tests/e2e/activation_closed_form_test.cpp) and the flash attention trace test
// (tests/trainer/test_flash_trace.cpp). Test-only (Catch2's REQUIRE, plain SQL on the trace).
#pragma once

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace tracerun::testing {

inline int64_t heldForBackward(const std::string& db) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  const char* sql =
      "WITH r AS (SELECT s.start_ns, s.dur_ns, n.value AS name FROM spans s JOIN tracks k "
      "ON k.id = s.track JOIN strings n ON n.id = s.name WHERE k.rank = 0), "
      "b AS (SELECT min(r.start_ns) AS t FROM r WHERE r.name = 'backward' AND r.start_ns > "
      "(SELECT max(start_ns) FROM r WHERE name = 'step')), "
      "c AS (SELECT id FROM memory_categories WHERE name = 'activation') "
      "SELECT coalesce(sum(a.bytes), -1) FROM memory a JOIN b JOIN c LEFT JOIN strings sc "
      "ON sc.id = a.scope WHERE a.rank = 0 AND a.bytes > 0 AND a.category = c.id "
      "AND coalesce(sc.value, '') NOT LIKE 'head%' AND a.ts_ns < b.t AND NOT EXISTS "
      "(SELECT 1 FROM memory f WHERE f.rank = 0 AND f.ptr = a.ptr AND f.bytes < 0 "
      "AND f.ts_ns > a.ts_ns AND f.ts_ns < b.t)";
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, sql, -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const int64_t bytes = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return bytes;
}

}  // namespace tracerun::testing
