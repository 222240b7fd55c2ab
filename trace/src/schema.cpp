// The schema's declaration and what is derived from it (SQL and the reference documentation).
#include "tracerun/trace/schema.h"

#include <sstream>

#include "tracerun/core/records.h"
#include "tracerun/core/tracks.h"
#include "tracerun/trace/error.h"

namespace tracerun::trace::schema {

// The generated columns of spans spell these numbers out in SQL.
static_assert(kPackedCategoryBits == 4 && kPackedDepthBits == 16 && kPackedNameShift == 20,
              "update the spans generated columns in tables()");
static_assert(static_cast<int>(core::Category::kCount) <= (1 << kPackedCategoryBits),
              "categories no longer fit spans.packed");
static_assert(packedName(packSpan(0xffffffffu, 0xffff, 15)) == 0xffffffffu &&
              packedDepth(packSpan(0xffffffffu, 0xffff, 15)) == 0xffff &&
              packedCategory(packSpan(0xffffffffu, 0xffff, 15)) == 15);

// The declarations below are built once and never destroyed (leaked on purpose): a shard is
// written from static destructors too (libtracerun converts its raw shard when the library
// unloads, after statics made later than its own are gone).
const std::vector<Table>& tables() {
  static const auto* const kTables = new std::vector<Table>{
      {"meta",
       "Key/value facts about the file. A tracerun trace has magic = 'tracerun'.",
       {{"key", "TEXT NOT NULL", "see the meta keys below"}, {"value", "TEXT NOT NULL", ""}},
       "PRIMARY KEY (key)",
       true},
      {"strings",
       "Interned text: every name, shape list and argument key in other tables is an id here.",
       {{"id", "INTEGER PRIMARY KEY", "0 is the empty string"},
        {"value", "TEXT NOT NULL", "the text"}},
       "",
       false},
      {"ranks",
       "One row per process (rank) that wrote events.",
       {{"rank", "INTEGER PRIMARY KEY", "global rank"},
        {"host", "TEXT NOT NULL", "host name"},
        {"pid", "INTEGER NOT NULL", "process id"},
        {"clock_offset_ns", "INTEGER NOT NULL",
         "this rank's CLOCK_MONOTONIC minus rank 0's; already applied to every time in a merged "
         "file"},
        {"start_ns", "INTEGER", "first event, relative to meta origin_ns"},
        {"end_ns", "INTEGER", "last event end, relative to meta origin_ns"}},
       "",
       false},
      {"attempts",
       "The runs of the job that the file holds, one row each (written by merge): a restart "
       "after a failure or an elastic resize starts a new attempt, with every process again. "
       "The last attempt's ranks keep their numbers (rank_offset 0); an earlier attempt's are "
       "numbered after them. A file with no rows here (a shard, a file written before this "
       "table) holds one attempt, 0, of meta world_size.",
       {{"attempt", "INTEGER PRIMARY KEY", "0, 1, ... (TORCHELASTIC_RESTART_COUNT)"},
        {"world_size", "INTEGER NOT NULL", "its number of ranks"},
        {"rank_offset", "INTEGER NOT NULL",
         "its RANK r is ranks.rank rank_offset + r: its rows are ranks rank_offset .. "
         "rank_offset + world_size - 1"},
        {"start_ns", "INTEGER", "its first event, relative to meta origin_ns"},
        {"end_ns", "INTEGER", "its last event end"}},
       "",
       false},
      {"tracks",
       "Timeline rows: a thread, an async lane, a device stream, a counter or a memory pool of one "
       "rank.",
       {{"id", "INTEGER PRIMARY KEY", "unique in the file"},
        {"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"kind", "INTEGER NOT NULL", "track_kinds.id"},
        {"tid", "INTEGER NOT NULL",
         "OS thread id, stream id or device index; 0 if none (e.g. the per-device sync track "
         "`cuda:0 sync`)"},
        {"name", "TEXT NOT NULL", "display name"},
        {"event_count", "INTEGER NOT NULL DEFAULT 0", "spans, instants or samples on the track"},
        {"longest_span_ns", "INTEGER NOT NULL DEFAULT 0", "the longest span on the track"},
        {"longest_chunk_ns", "INTEGER NOT NULL DEFAULT 0",
         "the widest span_chunks extent (max_end_ns - min_start_ns) on the track: the lower bound "
         "for range queries"}},
       "",
       false},
      {"spans",
       "Intervals: operators, autograd nodes, annotated scopes, collectives, kernels. Written per "
       "track in chunks sorted by start (see span_chunks), so id order is chunk order. depth, "
       "category and name are generated columns: read them like any other; they are stored "
       "together in `packed`, which is what inserts write.",
       {{"id", "INTEGER PRIMARY KEY", "unique in the file"},
        {"track", "INTEGER NOT NULL", "tracks.id"},
        {"start_ns", "INTEGER NOT NULL", "start, relative to meta origin_ns"},
        {"dur_ns", "INTEGER NOT NULL", "duration (end - start)"},
        {"depth", "INTEGER GENERATED ALWAYS AS ((packed >> 4) & 65535) VIRTUAL",
         "nesting depth on the track; 0 = root. The parent of a span is the enclosing span on its "
         "track at depth - 1"},
        {"category", "INTEGER GENERATED ALWAYS AS (packed & 15) VIRTUAL", "categories.id"},
        {"name", "INTEGER GENERATED ALWAYS AS (packed >> 20) VIRTUAL", "strings.id"},
        {"detail", "INTEGER", "strings.id of input shapes or other text; NULL if none"},
        {"seq", "INTEGER",
         "autograd sequence number linking forward op and backward node; NULL "
         "if none"},
        {"packed", "INTEGER NOT NULL",
         "category + (depth << 4) + (name << 20), category < 16, depth < 65536: the three are "
         "decoded as one column by the range query, whose cost is SQLite decoding columns"}},
       "",
       false},
      {"span_chunks",
       "Index of spans: each chunk is a run of consecutive span ids of one track. A track's spans "
       "overlapping [t0, t1] lie in chunks with min_start_ns <= t1 AND max_end_ns >= t0, found "
       "from min_start_ns >= t0 - tracks.longest_chunk_ns.",
       {{"track", "INTEGER NOT NULL", "tracks.id"},
        {"min_start_ns", "INTEGER NOT NULL", "earliest start in the chunk"},
        {"max_end_ns", "INTEGER NOT NULL", "latest end in the chunk"},
        {"first_id", "INTEGER NOT NULL", "first spans.id"},
        {"last_id", "INTEGER NOT NULL", "last spans.id (inclusive)"}},
       "PRIMARY KEY (track, min_start_ns, first_id)",
       true},
      {"span_lod_depths",
       "Level-of-detail summaries, per track and depth: how many spans, the longest, and which "
       "levels of span_lod the track stores. Built by merge (meta summaries).",
       {{"track", "INTEGER NOT NULL", "tracks.id"},
        {"depth", "INTEGER NOT NULL", "spans.depth"},
        {"span_count", "INTEGER NOT NULL", "spans of the track at this depth"},
        {"longest_span_ns", "INTEGER NOT NULL", "the longest of them"},
        {"first_level", "INTEGER NOT NULL",
         "finest level stored for the track; -1: none (the track is read from spans)"},
        {"top_level", "INTEGER NOT NULL",
         "coarsest level stored: one bucket per depth; coarser levels are merged from it"}},
       "PRIMARY KEY (track, depth)",
       true},
      {"span_lod",
       "Level-of-detail summaries: the spans of one track and depth that start in one bucket of "
       "width 4^level ns (bucket = floor(start_ns / 4^level)), with the bucket's dominant "
       "(longest) span. Levels from first_level to top_level of span_lod_depths.",
       {{"track", "INTEGER NOT NULL", "tracks.id"},
        {"level", "INTEGER NOT NULL", "bucket width 4^level ns"},
        {"depth", "INTEGER NOT NULL", "spans.depth"},
        {"bucket", "INTEGER NOT NULL", "floor(start_ns / 4^level)"},
        {"count", "INTEGER NOT NULL", "spans starting in the bucket"},
        {"busy_ns", "INTEGER NOT NULL", "their summed durations"},
        {"first_ns", "INTEGER NOT NULL", "earliest start"},
        {"max_end_ns", "INTEGER NOT NULL", "latest end"},
        {"dom_id", "INTEGER NOT NULL",
         "spans.id of the longest (ties: earlier start, then lower id)"},
        {"dom_start_ns", "INTEGER NOT NULL", "its start"},
        {"dom_dur_ns", "INTEGER NOT NULL", "its duration"},
        {"dom_packed", "INTEGER NOT NULL", "its spans.packed (name, depth, category)"}},
       "PRIMARY KEY (track, level, depth, bucket)",
       true},
      {"name_buckets",
       "Where each span name occurs: spans of one name on one track starting in one bucket of "
       "4^13 ns (67 ms). Name search counts from it and reads only the buckets it names.",
       {{"name", "INTEGER NOT NULL", "strings.id"},
        {"bucket", "INTEGER NOT NULL", "floor(start_ns / 4^13)"},
        {"track", "INTEGER NOT NULL", "tracks.id"},
        {"count", "INTEGER NOT NULL", "spans of that name there"}},
       "PRIMARY KEY (name, bucket, track)",
       true},
      {"memory_devices",
       "Summary: the devices with memory events, per rank (so a reader lists them without "
       "scanning memory).",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"device_type", "INTEGER NOT NULL", "0 = CPU, 1 = CUDA, 100 = nvme, 101 = cpu-offload"},
        {"device_index", "INTEGER NOT NULL", "-1 for the CPU"},
        {"events", "INTEGER NOT NULL", "memory rows of the device"}},
       "PRIMARY KEY (rank, device_type, device_index)",
       true},
      {"memory_lod",
       "Level-of-detail summaries of each device's live memory (memory.total): the samples of "
       "one (rank, device) whose ts_ns lies in one bucket of width 4^level ns (bucket = "
       "floor(ts_ns / 4^level)), reduced to count, min, max and last. Only levels that hold at "
       "most a quarter as many rows as the device has samples are stored, from the finest such "
       "one up to one with at most 4 rows (the stored levels: min(level) .. max(level)).",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"device_type", "INTEGER NOT NULL", "0 = CPU, 1 = CUDA, 100 = nvme, 101 = cpu-offload"},
        {"device_index", "INTEGER NOT NULL", "-1 for the CPU"},
        {"level", "INTEGER NOT NULL", "bucket width 4^level ns"},
        {"bucket", "INTEGER NOT NULL", "floor(ts_ns / 4^level)"},
        {"count", "INTEGER NOT NULL", "samples in the bucket"},
        {"min_total", "INTEGER NOT NULL", "smallest memory.total among them"},
        {"max_total", "INTEGER NOT NULL", "largest"},
        {"last_total", "INTEGER NOT NULL", "the last one's, in (ts_ns, rowid) order"}},
       "PRIMARY KEY (rank, device_type, device_index, level, bucket)",
       true},
      {"counter_lod",
       "Level-of-detail summaries of each counter track, as memory_lod is of memory: the samples "
       "of one track in one bucket of width 4^level ns reduced to count, min, max and last.",
       {{"track", "INTEGER NOT NULL", "tracks.id (kind counter)"},
        {"level", "INTEGER NOT NULL", "bucket width 4^level ns"},
        {"bucket", "INTEGER NOT NULL", "floor(ts_ns / 4^level)"},
        {"count", "INTEGER NOT NULL", "samples in the bucket"},
        {"min_value", "REAL NOT NULL", "smallest counters.value among them"},
        {"max_value", "REAL NOT NULL", "largest"},
        {"last_value", "REAL NOT NULL", "the last one's, in (ts_ns, rowid) order"}},
       "PRIMARY KEY (track, level, bucket)",
       true},
      {"memory_category_blocks",
       "The stored per-category memory summary (written by merge after the other summaries; meta "
       "memory_category_summary): each device's live bytes by category, in blocks of 64 memory "
       "events, so the viewer's memory tab reads O(blocks) rows instead of replaying every event. "
       "Varints are zigzag LEB128.",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"device_type", "INTEGER NOT NULL", "0 = CPU, 1 = CUDA, 100 = nvme, 101 = cpu-offload"},
        {"device_index", "INTEGER NOT NULL", "-1 for the CPU"},
        {"block", "INTEGER NOT NULL",
         "block b holds the device's events b * 64 .. b * 64 + count - 1"},
        {"first_ts_ns", "INTEGER NOT NULL", "its first event's time"},
        {"last_ts_ns", "INTEGER NOT NULL", "its last event's time"},
        {"count", "INTEGER NOT NULL", "events in the block (64 but the last)"},
        {"levels", "BLOB NOT NULL",
         "cumulative live bytes per stacked category as varints: the block's min (7), max (7), "
         "and after its last event (7), in the stacking order parameter, gradient, "
         "optimizer_state, activation, temporary, input, other"},
        {"events", "BLOB NOT NULL",
         "per event: varint ts - the previous event's ts (first_ts_ns for the first), varint "
         "signed bytes, one byte: the stacked category's index"}},
       "PRIMARY KEY (rank, device_type, device_index, block)",
       true},
      {"memory_category_allocations",
       "With memory_category_blocks: each allocation's category, so a click on the memory tab "
       "lists what was live without classifying again.",
       {{"rank", "INTEGER PRIMARY KEY", "ranks.rank"},
        {"categories", "BLOB NOT NULL",
         "one byte per allocation of the rank (memory_categories.id), in (ts_ns, rowid) order of "
         "its memory rows"}},
       "",
       false},
      {"args",
       "Named integer arguments of spans (pipeline stage, chunk, microbatch, phase, bytes...); for "
       "the string-valued keys (kernels' `mangled_name`, `short_name`: see String-valued "
       "arguments above) the value is a strings.id.",
       {{"span", "INTEGER NOT NULL", "spans.id"},
        {"key", "INTEGER NOT NULL", "strings.id of the argument name"},
        {"value", "INTEGER NOT NULL", "the value"}},
       "",
       false},
      {"instants",
       "Point events.",
       {{"track", "INTEGER NOT NULL", "tracks.id"},
        {"ts_ns", "INTEGER NOT NULL", "time, relative to meta origin_ns"},
        {"category", "INTEGER NOT NULL", "categories.id"},
        {"name", "INTEGER NOT NULL", "strings.id"},
        {"detail", "INTEGER", "strings.id; NULL if none"},
        {"value", "INTEGER NOT NULL DEFAULT 0", "an integer payload"}},
       "",
       false},
      {"counters",
       "Samples of named counters (loss, tokens/s...); the track names the counter.",
       {{"track", "INTEGER NOT NULL", "tracks.id (kind counter)"},
        {"ts_ns", "INTEGER NOT NULL", "time, relative to meta origin_ns"},
        {"value", "REAL NOT NULL", "the sample"}},
       "",
       false},
      {"memory",
       "Allocations (bytes > 0) and frees (bytes < 0).",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"ts_ns", "INTEGER NOT NULL", "time, relative to meta origin_ns"},
        {"device_type", "INTEGER NOT NULL", "0 = CPU, 1 = CUDA, 100 = nvme, 101 = cpu-offload"},
        {"device_index", "INTEGER NOT NULL", "-1 for the CPU"},
        {"ptr", "INTEGER NOT NULL", "address (as a signed 64-bit integer)"},
        {"bytes", "INTEGER NOT NULL", "+size on allocation, -size on free"},
        {"total", "INTEGER NOT NULL", "live bytes on the device after the event"},
        {"category", "INTEGER NOT NULL", "memory_categories.id"},
        {"op", "INTEGER", "strings.id of the innermost op; NULL if none"},
        {"scope", "INTEGER", "strings.id of the innermost user scope; NULL if none"}},
       "",
       false},
      {"flows",
       "Directed links between two events, each end named by its track and start time.",
       {{"kind", "INTEGER NOT NULL", "flow_kinds.id"},
        {"src_track", "INTEGER NOT NULL", "tracks.id"},
        {"src_ts_ns", "INTEGER NOT NULL", "start of the source event"},
        {"dst_track", "INTEGER NOT NULL", "tracks.id"},
        {"dst_ts_ns", "INTEGER NOT NULL", "start of the destination event"}},
       "",
       false},
      {"aggregates",
       "Per rank, name and category: count, total and self (exclusive) time of spans, computed "
       "when the shard is closed.",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"name", "INTEGER NOT NULL", "strings.id"},
        {"category", "INTEGER NOT NULL", "categories.id"},
        {"count", "INTEGER NOT NULL", "number of spans"},
        {"total_ns", "INTEGER NOT NULL", "sum of durations"},
        {"self_ns", "INTEGER NOT NULL", "sum of durations minus time in child spans"}},
       "PRIMARY KEY (rank, name, category)",
       true},
      {"stats",
       "What capture and storage counted: dropped events, clipped spans, unknown records. "
       "A row with severity 2 (error) means data was lost.",
       {{"rank", "INTEGER NOT NULL", "ranks.rank"},
        {"name", "TEXT NOT NULL", "e.g. dropped_events"},
        {"value", "INTEGER NOT NULL", "the count"},
        {"severity", "INTEGER NOT NULL", "0 info, 1 warning, 2 error"}},
       "PRIMARY KEY (rank, name)",
       true},
      {"categories",
       "Names of span and instant categories.",
       {{"id", "INTEGER PRIMARY KEY", ""}, {"name", "TEXT NOT NULL", ""}},
       "",
       false},
      {"track_kinds",
       "Names of track kinds.",
       {{"id", "INTEGER PRIMARY KEY", ""}, {"name", "TEXT NOT NULL", ""}},
       "",
       false},
      {"memory_categories",
       "Names of memory categories.",
       {{"id", "INTEGER PRIMARY KEY", ""}, {"name", "TEXT NOT NULL", ""}},
       "",
       false},
      {"flow_kinds",
       "Names of flow kinds.",
       {{"id", "INTEGER PRIMARY KEY", ""}, {"name", "TEXT NOT NULL", ""}},
       "",
       false},
  };
  return *kTables;
}

const std::vector<Index>& indexes() {
  static const auto* const kIndexes = new std::vector<Index>{
      {"args_by_span", "args", "span", "arguments of a span"},
      {"instants_by_time", "instants", "track, ts_ns", "a track's instants in a window"},
      {"counters_by_time", "counters", "track, ts_ns", "a counter's samples in a window"},
      {"memory_by_time", "memory", "rank, ts_ns", "a rank's memory events in a window"},
      {"flows_by_src", "flows", "src_track, src_ts_ns", "flows leaving an event"},
      {"flows_by_dst", "flows", "dst_track, dst_ts_ns", "flows entering an event"},
  };
  return *kIndexes;
}

const std::vector<View>& views() {
  static const auto* const kViews = new std::vector<View>{
      {"span_names", "spans with their rank, track name, category name, name and detail as text",
       "SELECT s.id, t.rank, s.track, t.name AS track_name, s.start_ns, s.dur_ns, s.depth, "
       "c.name AS category, n.value AS name, d.value AS detail, s.seq "
       "FROM spans s JOIN tracks t ON t.id = s.track JOIN categories c ON c.id = s.category "
       "JOIN strings n ON n.id = s.name LEFT JOIN strings d ON d.id = s.detail"},
      {"aggregate_names", "aggregates with the name and category as text",
       "SELECT a.rank, n.value AS name, c.name AS category, a.count, a.total_ns, a.self_ns "
       "FROM aggregates a JOIN strings n ON n.id = a.name JOIN categories c ON c.id = a.category"},
  };
  return *kViews;
}

const std::vector<MetaKey>& metaKeys() {
  static const auto* const kKeys = new std::vector<MetaKey>{
      {"magic", "always 'tracerun'"},
      {"schema_version", "this schema's version (also PRAGMA user_version)"},
      {"kind", "'shard' (one rank, written while running) or 'merged' (a whole run)"},
      {"complete", "'1' once the writer (or merge) closed the file cleanly"},
      {"origin_ns",
       "CLOCK_MONOTONIC ns of rank 0 that every *_ns time is relative to (the first attempt's "
       "rank 0 when the file holds several attempts)"},
      {"world_size",
       "number of ranks in the run (in its last attempt when the attempts table has several)"},
      {"command", "the traced command line"},
      {"created_unix_s", "wall-clock time the file was created"},
      {"tracerun_version", "version of the tool that wrote the file"},
      {"capture",
       "what libtracerun captured: a comma list of capture words (ops, scopes, ...; `--capture`, "
       "docs/capture.md)"},
      {"capture_shapes", "'1' when input shapes were recorded (span detail), '0' otherwise"},
      {"capture_target", "the program the launcher told libtracerun to capture in"},
      {"traced_ranks",
       "the ranks `tracerun --ranks` traced (\"0,8-15\"; merge joins its shards' lists); absent: "
       "every rank that ran"},
      {"memory_category_summary",
       "version of memory_category_blocks and memory_category_allocations ('2') once merge wrote "
       "them; absent: the memory tab replays the memory events"},
      {"summaries",
       "version of the level-of-detail tables (span_lod, span_lod_depths, name_buckets, "
       "memory_devices, memory_lod, counter_lod) when they are built (by merge, or a writer asked "
       "to); absent otherwise: a "
       "Timeline then builds them when it opens the file"},
  };
  return *kKeys;
}

namespace {

template <typename Enum, typename NameFn>
void enumRows(std::vector<std::string>& out, const char* table, Enum count, NameFn name) {
  for (int i = 0; i < static_cast<int>(count); ++i) {
    out.push_back(std::string("INSERT INTO ") + table + " VALUES (" + std::to_string(i) + ", '" +
                  name(static_cast<Enum>(i)) + "')");
  }
}

}  // namespace

std::vector<std::string> createStatements() {
  std::vector<std::string> out;
  for (const auto& t : tables()) {
    std::string sql = std::string("CREATE TABLE ") + t.name + " (";
    for (size_t i = 0; i < t.columns.size(); ++i) {
      if (i) sql += ", ";
      sql += std::string(t.columns[i].name) + " " + t.columns[i].type;
    }
    if (*t.constraint) sql += std::string(", ") + t.constraint;
    sql += ")";
    if (t.without_rowid) sql += " WITHOUT ROWID";
    out.push_back(sql);
  }
  for (const auto& v : views()) {
    out.push_back(std::string("CREATE VIEW ") + v.name + " AS " + v.select);
  }
  enumRows(out, "categories", core::Category::kCount, core::categoryName);
  enumRows(out, "track_kinds", core::TrackKind::kCount, core::trackKindName);
  enumRows(out, "memory_categories", core::MemoryCategory::kCount, core::memoryCategoryName);
  enumRows(out, "flow_kinds", core::FlowKind::kCount, core::flowKindName);
  return out;
}

const std::vector<std::string>& summaryTables() {
  static const auto* const kNames = new std::vector<std::string>{
      "span_lod_depths", "span_lod", "name_buckets", "memory_devices", "memory_lod", "counter_lod"};
  return *kNames;
}

std::vector<std::string> summaryTableStatements(bool temporary) {
  std::vector<std::string> out;
  const auto all = createStatements();
  for (const auto& name : summaryTables()) {
    const std::string prefix = "CREATE TABLE " + name + " (";
    for (const auto& sql : all) {
      if (sql.rfind(prefix, 0) != 0) continue;
      out.push_back(temporary ? "CREATE TEMP TABLE " + sql.substr(13) : sql);
    }
  }
  return out;
}

std::vector<std::string> indexStatements() {
  std::vector<std::string> out;
  for (const auto& i : indexes()) {
    out.push_back(std::string("CREATE INDEX IF NOT EXISTS ") + i.name + " ON " + i.table + " (" +
                  i.columns + ")");
  }
  return out;
}

std::string markdown() {
  std::ostringstream md;
  md << "Schema version " << kSchemaVersion << " (`PRAGMA user_version`, meta `schema_version`).\n";
  md << "\n### Meta keys\n\n| key | meaning |\n| --- | --- |\n";
  for (const auto& k : metaKeys()) md << "| `" << k.key << "` | " << k.doc << " |\n";
  for (const auto& t : tables()) {
    md << "\n### `" << t.name << "`\n\n"
       << t.doc << "\n\n| column | type | meaning |\n"
       << "| --- | --- | --- |\n";
    for (const auto& c : t.columns) {
      md << "| `" << c.name << "` | " << c.type << " | " << c.doc << " |\n";
    }
    if (*t.constraint || t.without_rowid) {
      md << "\n"
         << (*t.constraint ? t.constraint : "") << (t.without_rowid ? " WITHOUT ROWID" : "")
         << "\n";
    }
  }
  md << "\n### Indexes (built when the file is closed)\n\n| index | on | for |\n| --- | --- | --- "
        "|\n";
  for (const auto& i : indexes()) {
    md << "| `" << i.name << "` | `" << i.table << "(" << i.columns << ")` | " << i.doc << " |\n";
  }
  md << "\n### Views\n\n| view | gives |\n| --- | --- |\n";
  for (const auto& v : views()) md << "| `" << v.name << "` | " << v.doc << " |\n";
  md << "\n### Enumerations\n\n";
  auto enumTable = [&](const char* title, int count, auto name) {
    md << "`" << title << "`: ";
    for (int i = 0; i < count; ++i) md << (i ? ", " : "") << i << " = " << name(i);
    md << "\n\n";
  };
  enumTable("categories", int(core::Category::kCount),
            [](int i) { return core::categoryName(core::Category(i)); });
  enumTable("track_kinds", int(core::TrackKind::kCount),
            [](int i) { return core::trackKindName(core::TrackKind(i)); });
  enumTable("memory_categories", int(core::MemoryCategory::kCount),
            [](int i) { return core::memoryCategoryName(core::MemoryCategory(i)); });
  enumTable("flow_kinds", int(core::FlowKind::kCount),
            [](int i) { return core::flowKindName(core::FlowKind(i)); });
  return md.str();
}

}  // namespace tracerun::trace::schema
