// Writes TraceBuilder's lists as a real trace: one Session and ShardWriter per rank, one producer
// thread per named thread track (records pushed in end order, as capture emits them), then merge.
#include "analysis_builder.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "../support/process_scratch.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

namespace tracerun::testing {

namespace {

void push(core::ThreadBuffer& buf, const core::Record& r) {
  if (!buf.ring.tryPush(r)) throw std::runtime_error("builder: ring full");
}

}  // namespace

std::string scratchDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::processScratchPath("analysis")) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string TraceBuilder::write(const std::string& dir) {
  // Every rank's writer shares one origin, so the same builder writes the same times every run.
  const int64_t origin = core::nowNs();
  const int64_t base = origin + 10'000'000;
  std::vector<trace::MergeInput> inputs;
  for (size_t rank = 0; rank < ranks_.size(); ++rank) {
    const Rank& R = ranks_[rank];
    size_t records = R.spans.size() * 2 + R.memory.size() + R.flows.size() + R.instants.size() +
                     R.counters.size() + 1024;
    core::Session session(std::max<size_t>(size_t{1} << 12, records));
    trace::ShardOptions so;
    so.path = (std::filesystem::path(dir) / ("rank" + std::to_string(rank) + ".db")).string();
    so.rank = R.rank_in_attempt >= 0 ? R.rank_in_attempt : static_cast<int>(rank);
    so.world_size = R.world_size > 0 ? R.world_size : static_cast<int>(ranks_.size());
    so.host = "builder";
    so.pid = 100 + static_cast<int64_t>(rank);
    so.command = "analysis test";
    so.chunk_rows = 16;  // several chunks per track
    so.origin_ns = origin;
    trace::ShardWriter writer(session, so);
    writer.start();
    auto& strings = session.strings();
    const core::TrackId asyncTrack =
        session.tracks().findOrAdd(core::TrackKind::kAsync, 0, "async");

    // Tracks named "async" or "async:NAME" are async lanes (NAME: a lane of that name, such as
    // the c10d decorator's "c10d dp [0,2]"); their spans are pushed from main.
    auto isAsync = [](const std::string& t) { return t.rfind("async", 0) == 0; };
    std::map<std::string, core::TrackId> asyncTracks{{"async", asyncTrack}};
    for (const BSpan& s : R.spans) {
      if (isAsync(s.track) && !asyncTracks.count(s.track)) {
        asyncTracks[s.track] =
            session.tracks().findOrAdd(core::TrackKind::kAsync, 0, s.track.substr(6));
      }
    }
    std::vector<std::string> threads = {"main"};
    for (const BSpan& s : R.spans) {
      if (!isAsync(s.track) && std::find(threads.begin(), threads.end(), s.track) == threads.end())
        threads.push_back(s.track);
    }
    for (const BFlow& f : R.flows) {
      for (const std::string& t : {f.src_track, f.dst_track}) {
        if (!isAsync(t) && std::find(threads.begin(), threads.end(), t) == threads.end())
          threads.push_back(t);
      }
    }
    std::map<std::string, core::TrackId> trackOf;
    trackOf["async"] = asyncTrack;
    // Every thread registers first (flows name tracks of other threads), then produces.
    std::mutex mu;
    std::condition_variable cv;
    size_t registered = 0;
    std::vector<std::thread> workers;
    for (const std::string& name : threads) {
      std::vector<size_t> mine;
      for (size_t i = 0; i < R.spans.size(); ++i) {
        const std::string& t = R.spans[i].track;
        if (t == name || (name == "main" && isAsync(t))) mine.push_back(i);
      }
      std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
        const BSpan& x = R.spans[a];
        const BSpan& y = R.spans[b];
        return x.start != y.start ? x.start < y.start : x.depth < y.depth;
      });
      workers.emplace_back([&, name, mine] {
        core::ThreadBuffer& buf = session.threadBuffer(name.c_str());
        {
          std::unique_lock<std::mutex> lock(mu);
          trackOf[name] = buf.track;
          if (++registered == threads.size()) cv.notify_all();
          cv.wait(lock, [&] { return registered == threads.size(); });
        }
        std::map<size_t, core::EventId> id, parent;
        std::vector<size_t> stack;
        for (size_t i : mine) {
          id[i] = buf.nextId();
          const BSpan& s = R.spans[i];
          if (isAsync(s.track)) continue;
          stack.resize(std::min(stack.size(), static_cast<size_t>(s.depth)));
          parent[i] = stack.empty() ? 0 : id[stack.back()];
          stack.push_back(i);
        }
        std::vector<size_t> byEnd = mine;
        std::stable_sort(byEnd.begin(), byEnd.end(), [&](size_t a, size_t b) {
          const BSpan& x = R.spans[a];
          const BSpan& y = R.spans[b];
          return x.end != y.end ? x.end < y.end : x.depth > y.depth;
        });
        std::vector<core::Record> out;
        {
          std::lock_guard<std::mutex> lock(mu);  // interning is thread-safe; ids map is ours
          for (size_t i : byEnd) {
            const BSpan& s = R.spans[i];
            core::SpanRecord r;
            r.category = s.category;
            r.depth = static_cast<uint16_t>(s.depth);
            r.name = strings.intern(s.name);
            r.start_ns = base + s.start;
            r.end_ns = base + s.end;
            r.id = id[i];
            r.parent = parent.count(i) ? parent[i] : 0;
            r.seq = s.seq;
            r.detail = s.detail.empty() ? 0 : strings.intern(s.detail);
            r.track = isAsync(s.track) ? asyncTracks.at(s.track) : 0;
            out.push_back(core::Record::from(r));
            // Three arguments a record, as the capture writes them (thread_state.cpp).
            for (size_t first = 0; first < s.args.size(); first += 3) {
              core::ArgsRecord a;
              a.count = static_cast<uint8_t>(std::min<size_t>(3, s.args.size() - first));
              a.owner = r.id;
              for (size_t k = 0; k < a.count; ++k) {
                a.args[k].key = strings.intern(s.args[first + k].first);
                a.args[k].value = s.args[first + k].second;
              }
              out.push_back(core::Record::from(a));
            }
          }
          if (name == "main") {
            std::map<int, int64_t> live;  // per device
            for (const BMemory& m : R.memory) {
              core::MemoryRecord r;
              r.category = m.category;
              r.device_type = static_cast<int8_t>(m.device_type);
              r.device_index = static_cast<int8_t>(m.device_index);
              r.op = m.op.empty() ? 0 : strings.intern(m.op);
              r.scope = m.scope.empty() ? 0 : strings.intern(m.scope);
              r.ts_ns = base + m.ts;
              r.ptr = m.ptr;
              r.bytes = m.bytes;
              r.total = live[m.device_type * 256 + m.device_index] += m.bytes;
              out.push_back(core::Record::from(r));
            }
            for (const BFlow& f : R.flows) {
              core::FlowRecord r;
              r.flow = f.kind;
              r.src_track = trackOf.at(f.src_track);
              r.dst_track = trackOf.at(f.dst_track);
              r.src_ts_ns = base + f.src_ts;
              r.dst_ts_ns = base + f.dst_ts;
              out.push_back(core::Record::from(r));
            }
            for (const BInstant& i : R.instants) {
              core::InstantRecord r;
              r.name = strings.intern(i.name);
              r.ts_ns = base + i.ts;
              r.value = i.value;
              out.push_back(core::Record::from(r));
            }
            for (const BCounter& c : R.counters) {
              core::CounterRecord r;
              r.name = strings.intern(c.name);
              r.ts_ns = base + c.ts;
              r.value = c.value;
              out.push_back(core::Record::from(r));
            }
          }
        }
        for (size_t k = 0; k < out.size(); ++k) {
          // An args record must follow its span in the same buffer: push them as a pair.
          if (k + 1 < out.size() && out[k + 1].kind() == core::RecordKind::kArgs) {
            if (!buf.ring.tryPushPair(out[k], out[k + 1])) throw std::runtime_error("ring full");
            ++k;
          } else {
            push(buf, out[k]);
          }
        }
      });
    }
    for (auto& w : workers) w.join();
    for (const BStat& s : R.stats) writer.setStat(s.name, s.value, s.severity);
    writer.close();
    if (session.dropped() != 0) throw std::runtime_error("builder: records were dropped");
    inputs.push_back({so.path});
    inputs.back().attempt = R.attempt;
  }
  const std::string merged = (std::filesystem::path(dir) / "run.db").string();
  trace::mergeShards(inputs, trace::MergeOptions{merged, {}});
  offset_ = base - std::stoll(trace::TraceReader::open(merged).meta("origin_ns"));
  return merged;
}

}  // namespace tracerun::testing
