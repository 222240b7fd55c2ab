// The data thread (see data_worker.h): one loop taking the most urgent pending request.
#include "data/data_worker.h"

namespace tracerun::viewer {

DataWorker::DataWorker(std::string path, std::function<void()> wake)
    : path_(std::move(path)), wake_(std::move(wake)), thread_([this] { run(); }) {}

DataWorker::~DataWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cancelView_ = cancelFind_ = cancelStop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t DataWorker::requestView(std::vector<int64_t> tracks, const LodWindow& w) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t gen = ++viewGen_;
  view_ = ViewJob{gen, std::move(tracks), w};
  cancelView_ = true;  // the running one (if any) stops at its next track
  cv_.notify_all();
  return gen;
}

void DataWorker::requestDetails(const SpanRef& span, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& d : details_) {
    if (d.first == tag) {  // latest wins per tag (hover replaces hover)
      d.second = span;
      cv_.notify_all();
      return;
    }
  }
  details_.push_back({tag, span});
  cv_.notify_all();
}

void DataWorker::requestSpanById(int64_t id, int rank, bool center) {
  std::lock_guard<std::mutex> lock(mu_);
  byId_ = ByIdJob{id, rank, center};
  cv_.notify_all();
}

void DataWorker::requestFind(std::string needle) {
  std::lock_guard<std::mutex> lock(mu_);
  find_ = std::move(needle);
  cancelFind_ = true;
  cv_.notify_all();
}

void DataWorker::requestSteps() {
  std::lock_guard<std::mutex> lock(mu_);
  steps_ = true;
  cv_.notify_all();
}

WorkerOutput DataWorker::take() {
  std::lock_guard<std::mutex> lock(mu_);
  WorkerOutput o = std::move(out_);
  out_ = WorkerOutput{};
  return o;
}

bool DataWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || hasJobLocked() || !out_.empty();
}

bool DataWorker::hasJobLocked() const {
  return view_ || !details_.empty() || byId_ || find_ || steps_;
}

void DataWorker::run() {
  std::optional<TraceData> data;
  {
    OpenResult r;
    try {
      data = TraceData::open(path_);
      r.ok = true;
      r.ranks = data->ranks();
      r.tracks = data->tracks();
      r.range = data->timeRange();
      r.counts = data->counts();
      r.restarts = data->restarts();
      // Names for labels: the UI thread draws them without asking the reader.
      for (size_t i = 0; i < data->stringCount(); ++i)
        r.strings.push_back(data->str(static_cast<core::StringId>(i)));
    } catch (const std::exception& e) {
      r.ok = false;
      r.error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    out_.opened = std::move(r);
  }
  wake_();
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || hasJobLocked(); });
    if (stop_) return;
    running_ = true;
    // Most urgent first: the view, the selection, --goto, steps, find.
    if (view_) {
      ViewJob job = std::move(*view_);
      view_.reset();
      cancelView_ = false;
      lock.unlock();
      bool cancelled = !data;
      for (int64_t t : job.tracks) {
        if (cancelled || cancelView_.load()) {
          cancelled = true;
          break;
        }
        try {
          TrackWindow w = data->window(t, job.window);
          std::lock_guard<std::mutex> l(mu_);
          out_.windows.push_back(std::move(w));
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> l(mu_);
          out_.errors.push_back(e.what());
        }
      }
      lock.lock();
      if (!cancelled) out_.view_done = job.gen;
    } else if (!details_.empty()) {
      auto job = details_.front();
      details_.erase(details_.begin());
      lock.unlock();
      std::optional<SpanDetails> d;
      std::string error;
      try {
        if (data) d = data->details(job.second);
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      if (d) out_.details.push_back({job.first, std::move(*d)});
      if (!error.empty()) out_.errors.push_back(error);
    } else if (byId_) {
      ByIdJob job = *byId_;
      byId_.reset();
      lock.unlock();
      ByIdResult r{job.id, std::nullopt, job.center};
      std::string error;
      try {
        if (data) r.span = data->spanById(job.id, job.rank, cancelStop_);
      } catch (const Cancelled&) {
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      out_.by_id = r;
      if (!error.empty()) out_.errors.push_back(error);
    } else if (steps_) {
      steps_ = false;
      lock.unlock();
      std::vector<Step> steps;
      try {
        if (data) steps = data->steps(cancelStop_);
      } catch (const Cancelled&) {
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> l(mu_);
        out_.errors.push_back(e.what());
      }
      lock.lock();
      out_.steps = std::move(steps);
    } else if (find_) {
      FindResult r;
      r.needle = std::move(*find_);
      find_.reset();
      cancelFind_ = false;
      lock.unlock();
      bool cancelled = false;
      try {
        if (data) r.matches = data->find(r.needle, kFindLimit, cancelFind_);
        r.truncated = r.matches.size() >= kFindLimit;
      } catch (const Cancelled&) {
        cancelled = true;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> l(mu_);
        out_.errors.push_back(e.what());
      }
      lock.lock();
      if (!cancelled) out_.find = std::move(r);
    }
    running_ = false;
    lock.unlock();
    wake_();
  }
}

}  // namespace tracerun::viewer
