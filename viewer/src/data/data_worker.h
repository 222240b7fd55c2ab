// DataWorker: the viewer's data thread. It owns its own TraceData (its own TraceReader) and answers
// the UI's queries so that no frame waits on SQLite. Requests are latest-wins per kind: a newer
// view or find request cancels the one running. Results are collected by take(); `wake` is called
// (from the data thread) when something is ready. Draws nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/trace_data.h"

namespace tracerun::viewer {

struct OpenResult {
  bool ok = false;
  std::string error;  // one line when !ok
  std::vector<trace::RankInfo> ranks;
  std::vector<TrackInfo> tracks;
  std::pair<int64_t, int64_t> range{0, 0};
  trace::EventCounts counts;
  std::vector<std::string> strings;                    // by StringId
  std::vector<trace::analysis::RestartMark> restarts;  // elastic restarts, in time order
};

struct FindResult {
  std::string needle;
  std::vector<SpanRef> matches;  // start order
  bool truncated = false;
};

struct ByIdResult {
  int64_t id = 0;
  std::optional<SpanRef> span;
  bool center = false;  // --goto: the view moves to it
};

struct WorkerOutput {
  std::optional<OpenResult> opened;
  std::vector<TrackWindow> windows;
  std::optional<uint64_t> view_done;                      // generation of the finished view request
  std::vector<std::pair<uint64_t, SpanDetails>> details;  // (tag, details)
  std::optional<ByIdResult> by_id;
  std::optional<FindResult> find;
  std::optional<std::vector<Step>> steps;
  std::vector<std::string> errors;
  bool empty() const {
    return !opened && windows.empty() && !view_done && details.empty() && !by_id && !find &&
           !steps && errors.empty();
  }
};

class DataWorker {
 public:
  static constexpr size_t kFindLimit = 1'000'000;

  DataWorker(std::string path, std::function<void()> wake);
  ~DataWorker();
  DataWorker(const DataWorker&) = delete;
  DataWorker& operator=(const DataWorker&) = delete;

  // Returns the request's generation (view_done carries it back).
  uint64_t requestView(std::vector<int64_t> tracks, const LodWindow& w);
  void requestDetails(const SpanRef& span, uint64_t tag);
  void requestSpanById(int64_t id, int rank, bool center);
  void requestFind(std::string needle);
  void requestSteps();

  WorkerOutput take();
  // True while a request is queued or running, or output waits to be taken.
  bool busy() const;

 private:
  struct ViewJob {
    uint64_t gen = 0;
    std::vector<int64_t> tracks;
    LodWindow window;
  };
  struct ByIdJob {
    int64_t id = 0;
    int rank = -1;
    bool center = false;
  };
  void run();
  bool hasJobLocked() const;

  std::string path_;
  std::function<void()> wake_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool running_ = false;
  uint64_t viewGen_ = 0;
  std::optional<ViewJob> view_;
  std::vector<std::pair<uint64_t, SpanRef>> details_;
  std::optional<ByIdJob> byId_;
  std::optional<std::string> find_;
  bool steps_ = false;
  std::atomic<bool> cancelView_{false}, cancelFind_{false}, cancelStop_{false};
  WorkerOutput out_;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace tracerun::viewer
