// `tracerun info run.db [--json]`: what a trace holds (format, ranks, tracks, event counts, time
// range, stats) and whether SQLite finds it intact; and its short form, the launcher's end-of-run
// summary (printRunSummary). Reads through TraceReader only; no analyses.
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"

namespace tracerun::tools {

namespace {

struct InfoOptions {
  std::string path;
  bool json = false;
};

// Everything printed, gathered first: a file that fails half-way prints nothing on stdout.
struct Info {
  std::string path;
  int schema_version = 0;
  std::map<std::string, std::string> meta;
  std::vector<trace::RankInfo> ranks;
  std::vector<trace::AttemptInfo> attempts;
  std::vector<trace::TrackRow> tracks;
  trace::EventCounts counts;
  std::pair<int64_t, int64_t> range;
  std::vector<trace::StatRow> stats;
};

Info gather(const std::string& path) {
  auto reader = trace::TraceReader::open(path);
  Info info;
  info.path = path;
  info.schema_version = reader.schemaVersion();
  for (const auto& key : trace::schema::metaKeys()) {
    const std::string value = reader.meta(key.key);
    if (!value.empty()) info.meta[key.key] = value;
  }
  info.ranks = reader.ranks();
  info.attempts = reader.attempts();
  info.tracks = reader.tracks();
  info.counts = reader.counts();
  info.range = reader.timeRange();
  info.stats = reader.stats();
  reader.quickCheck();  // last: a damaged page anywhere fails here
  return info;
}

std::string metaOr(const Info& info, const char* key, const char* fallback) {
  const auto it = info.meta.find(key);
  return it == info.meta.end() ? fallback : it->second;
}

std::string createdText(const Info& info) {
  const auto it = info.meta.find("created_unix_s");
  if (it == info.meta.end()) return "?";
  std::time_t t = 0;
  try {
    t = static_cast<std::time_t>(std::stoll(it->second));
  } catch (const std::exception&) {
    return it->second;
  }
  std::tm tm{};
  char b[64];
  if (!localtime_r(&t, &tm) || !std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm)) {
    return it->second;
  }
  return b;
}

// Sums and differences of a damaged file's values (any int64) saturate instead of overflowing.
int64_t trackEvents(const Info& info, int rank) {
  int64_t n = 0;
  for (const auto& t : info.tracks) {
    if (t.rank == rank && __builtin_add_overflow(n, t.event_count, &n)) {
      n = t.event_count > 0 ? INT64_MAX : INT64_MIN;
    }
  }
  return n;
}

int64_t span(std::pair<int64_t, int64_t> range) {
  int64_t d = 0;
  if (!__builtin_sub_overflow(range.second, range.first, &d)) return d;
  return range.first < 0 ? INT64_MAX : INT64_MIN;
}

void printText(const Info& info) {
  const auto& c = info.counts;
  std::printf("%s\n", info.path.c_str());
  std::printf("  format      tracerun trace, schema version %d (%s, %s)\n", info.schema_version,
              metaOr(info, "kind", "?").c_str(),
              metaOr(info, "complete", "0") == "1" ? "complete" : "incomplete");
  std::printf("  written     %s by tracerun %s\n", createdText(info).c_str(),
              metaOr(info, "tracerun_version", "?").c_str());
  std::printf("  command     %s\n", metaOr(info, "command", "").c_str());
  std::printf("  origin      %s ns (CLOCK_MONOTONIC of rank 0; times below are relative)\n",
              metaOr(info, "origin_ns", "?").c_str());
  std::printf("  time range  %s .. %s (%s)\n", formatDuration(info.range.first).c_str(),
              formatDuration(info.range.second).c_str(), formatDuration(span(info.range)).c_str());
  std::printf(
      "  events      %lld spans, %lld args, %lld instants, %lld counter samples, %lld "
      "memory events, %lld flows\n",
      static_cast<long long>(c.spans), static_cast<long long>(c.args),
      static_cast<long long>(c.instants), static_cast<long long>(c.counters),
      static_cast<long long>(c.memory), static_cast<long long>(c.flows));
  std::printf("  integrity   ok (PRAGMA quick_check)\n");

  if (info.attempts.size() > 1) {  // restarts or elastic rounds: every one's ranks are here
    std::printf("\nattempts (%zu; a rank row's attempt:rank says which)\n", info.attempts.size());
    for (const auto& a : info.attempts) {
      std::printf("  attempt %-3d world size %-4d %s .. %s\n", a.attempt, a.world_size,
                  formatDuration(a.start_ns).c_str(), formatDuration(a.end_ns).c_str());
    }
  }
  const std::string traced = metaOr(info, "traced_ranks", "");
  std::printf("\nranks (%zu, world size %s%s)\n", info.ranks.size(),
              metaOr(info, "world_size", "?").c_str(),
              traced.empty() ? "" : ("; traced: " + traced + ", tracerun --ranks").c_str());
  std::printf("  %-5s %-20s %-8s %-14s %-12s %-12s %s\n", "rank", "host", "pid", "clock offset",
              "first event", "last event", "track events");
  for (const auto& r : info.ranks) {
    const std::string rank = info.attempts.size() > 1
                                 ? std::to_string(r.rank) + " (" + std::to_string(r.attempt) + ":" +
                                       std::to_string(r.attempt_rank) + ")"
                                 : std::to_string(r.rank);
    std::printf("  %-5s %-20s %-8lld %-14s %-12s %-12s %lld\n", rank.c_str(), r.host.c_str(),
                static_cast<long long>(r.pid),
                ((r.clock_offset_ns >= 0 ? "+" : "") + formatDuration(r.clock_offset_ns)).c_str(),
                formatDuration(r.start_ns).c_str(), formatDuration(r.end_ns).c_str(),
                static_cast<long long>(trackEvents(info, r.rank)));
  }

  std::printf("\ntracks (%zu)\n", info.tracks.size());
  std::printf("  %-5s %-6s %-8s %-10s %-13s %s\n", "rank", "id", "kind", "events", "longest span",
              "name");
  for (const auto& t : info.tracks) {
    std::string name = t.name;
    if (t.tid != 0) name += " (tid " + std::to_string(t.tid) + ")";
    std::printf("  %-5d %-6lld %-8s %-10lld %-13s %s\n", t.rank, static_cast<long long>(t.id),
                core::trackKindName(t.kind), static_cast<long long>(t.event_count),
                t.longest_span_ns ? formatDuration(t.longest_span_ns).c_str() : "-", name.c_str());
  }

  int errors = 0;
  std::printf("\nstats (%zu)\n", info.stats.size());
  std::printf("  %-5s %-28s %-12s %s\n", "rank", "name", "value", "severity");
  for (const auto& s : info.stats) {
    if (s.severity == trace::Severity::kError) ++errors;
    std::printf("  %-5d %-28s %-12lld %s\n", s.rank, s.name.c_str(),
                static_cast<long long>(s.value), trace::severityName(s.severity));
  }
  if (errors) {
    std::printf("  %d stat%s with severity error: the capture lost data (see above)\n", errors,
                errors == 1 ? "" : "s");
  }
}

void printJson(const Info& info) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["path"] = info.path;
  j["schema_version"] = info.schema_version;
  j["meta"] = ordered_json::object();
  for (const auto& [k, v] : info.meta) j["meta"][k] = v;
  j["integrity"] = "ok";
  j["time_range_ns"] = {info.range.first, info.range.second};
  const auto& c = info.counts;
  j["counts"] = {{"spans", c.spans},       {"args", c.args},     {"instants", c.instants},
                 {"counters", c.counters}, {"memory", c.memory}, {"flows", c.flows}};
  j["ranks"] = ordered_json::array();
  for (const auto& r : info.ranks) {
    j["ranks"].push_back({{"rank", r.rank},
                          {"host", r.host},
                          {"pid", r.pid},
                          {"clock_offset_ns", r.clock_offset_ns},
                          {"start_ns", r.start_ns},
                          {"end_ns", r.end_ns},
                          {"attempt", r.attempt},
                          {"attempt_rank", r.attempt_rank}});
  }
  j["attempts"] = ordered_json::array();
  for (const auto& a : info.attempts) {
    j["attempts"].push_back({{"attempt", a.attempt},
                             {"world_size", a.world_size},
                             {"start_ns", a.start_ns},
                             {"end_ns", a.end_ns}});
  }
  j["tracks"] = ordered_json::array();
  for (const auto& t : info.tracks) {
    j["tracks"].push_back({{"id", t.id},
                           {"rank", t.rank},
                           {"kind", core::trackKindName(t.kind)},
                           {"tid", t.tid},
                           {"name", t.name},
                           {"event_count", t.event_count},
                           {"longest_span_ns", t.longest_span_ns}});
  }
  j["stats"] = ordered_json::array();
  for (const auto& s : info.stats) {
    j["stats"].push_back({{"rank", s.rank},
                          {"name", s.name},
                          {"value", s.value},
                          {"severity", trace::severityName(s.severity)}});
  }
  // Names are bytes from the traced program: invalid UTF-8 becomes U+FFFD rather than an error.
  std::cout << j.dump(2, ' ', false, ordered_json::error_handler_t::replace) << "\n";
}

}  // namespace

void printRunSummary(const std::string& path, std::FILE* out) {
  const auto reader = trace::TraceReader::open(path);
  const auto counts = reader.counts();
  int64_t ops = 0, backward = 0, scopes = 0;
  for (const auto& a : reader.aggregates()) {
    if (a.category == core::Category::kOp) ops += a.count;
    if (a.category == core::Category::kBackward) backward += a.count;
    if (a.category == core::Category::kUser || a.category == core::Category::kPhase ||
        a.category == core::Category::kModule) {
      scopes += a.count;
    }
  }
  int64_t dropped = 0, peak = 0, errors = 0;
  for (const auto& s : reader.stats()) {
    if (s.name == "dropped_events") dropped += s.value;
    if (s.name == "memory_peak_bytes") peak = std::max(peak, s.value);
    if (s.severity == trace::Severity::kError) ++errors;
  }
  struct stat st {};
  ::stat(path.c_str(), &st);
  const size_t ranks = reader.ranks().size();
  std::fprintf(out, "tracerun: trace written to %s (%zu rank%s, %s)\n", path.c_str(), ranks,
               ranks == 1 ? "" : "s", formatBytes(static_cast<double>(st.st_size)).c_str());
  std::fprintf(out, "  spans:   %s (ops %s, backward nodes %s, scopes %s)\n",
               formatCount(counts.spans).c_str(), formatCount(ops).c_str(),
               formatCount(backward).c_str(), formatCount(scopes).c_str());
  std::fprintf(out, "  events:  %s memory, %s flows, %s counter samples, %s instants\n",
               formatCount(counts.memory).c_str(), formatCount(counts.flows).c_str(),
               formatCount(counts.counters).c_str(), formatCount(counts.instants).c_str());
  std::fprintf(out, "  memory:  peak %s live (CPU)\n",
               formatBytes(static_cast<double>(peak)).c_str());
  std::fprintf(out, "  dropped: %s events%s\n", formatCount(dropped).c_str(),
               errors ? " (stats with severity error: see tracerun info)" : "");
}

Command addInfoCommand(CLI::App& parent) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* app = parent.add_subcommand(
      "info", "Show what a trace holds: schema version, ranks, tracks, event counts, stats");
  app->add_option("trace", opts->path, "the trace file (run.db or a rank shard)")->required();
  app->add_flag("--json", opts->json, "print one JSON object instead of text");
  return {app, [opts] {
            return withPath(opts->path, [&] {
              const Info info = gather(opts->path);
              if (opts->json) {
                printJson(info);
              } else {
                printText(info);
              }
              std::fflush(stdout);
              return kExitOk;
            });
          }};
}

}  // namespace tracerun::tools
