// trace_schema_doc: rewrites the generated reference section of docs/trace-format.md (between the
// schema:begin / schema:end marker lines) from schema::markdown(), and writes the small sample
// trace the doc's worked queries run on. Touches nothing else in the doc; captures nothing real.
//
//   trace_schema_doc docs/trace-format.md     # rewrite the section in place
//   trace_schema_doc --print                  # print the section to stdout
//   trace_schema_doc --sample sample.db       # write the sample trace (through ShardWriter)
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tracerun/core/clock.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/schema.h"
#include "tracerun/trace/shard_writer.h"

namespace {

using namespace tracerun;

// Pushes spans in end order with depth and parent taken from a per-track stack, as capture does.
class Emitter {
 public:
  Emitter(core::Session& s, core::ThreadBuffer& buf) : s_(s), buf_(buf) {}

  int64_t now() const { return t_; }
  void advance(int64_t ns) { t_ += ns; }

  void open(core::TrackId track, const char* name, core::Category cat, const char* detail = "",
            int64_t seq = -1) {
    Open o;
    o.rec.category = cat;
    o.rec.name = s_.strings().intern(name);
    o.rec.detail = *detail ? s_.strings().intern(detail) : 0;
    o.rec.start_ns = t_;
    o.rec.id = buf_.nextId();
    o.rec.seq = seq;
    auto& stack = stacks_[track];
    o.rec.depth = static_cast<uint16_t>(stack.size());
    o.rec.parent = stack.empty() ? 0 : stack.back().rec.id;
    o.rec.track = track == buf_.track ? 0 : track;
    stack.push_back(o);
    t_ += 500;
  }
  void arg(core::TrackId track, const char* key, int64_t value) {
    Open& o = stacks_[track].back();
    o.args.args[o.args.count].key = s_.strings().intern(key);
    o.args.args[o.args.count].value = value;
    ++o.args.count;
  }
  void close(core::TrackId track, int64_t selfNs) {
    t_ += selfNs;
    auto& stack = stacks_[track];
    Open o = stack.back();
    stack.pop_back();
    o.rec.end_ns = t_;
    if (o.args.count) {
      o.args.owner = o.rec.id;
      buf_.ring.tryPushPair(core::Record::from(o.rec), core::Record::from(o.args));
    } else {
      buf_.ring.tryPush(core::Record::from(o.rec));
    }
    t_ += 300;
  }
  void leaf(core::TrackId track, const char* name, core::Category cat, int64_t ns,
            const char* detail = "") {
    open(track, name, cat, detail);
    close(track, ns);
  }
  void counter(const char* name, double value) {
    core::CounterRecord c;
    c.name = s_.strings().intern(name);
    c.ts_ns = t_;
    c.value = value;
    buf_.ring.tryPush(core::Record::from(c));
  }
  void memory(int64_t bytes, int64_t& live, core::MemoryCategory cat, uint64_t ptr,
              const char* op) {
    live += bytes;
    core::MemoryRecord m;
    m.category = cat;
    m.device_index = -1;
    m.ts_ns = t_;
    m.ptr = ptr;
    m.bytes = bytes;
    m.total = live;
    m.op = *op ? s_.strings().intern(op) : 0;
    buf_.ring.tryPush(core::Record::from(m));
  }
  void flow(core::FlowKind kind, core::TrackId src, int64_t srcTs, core::TrackId dst,
            int64_t dstTs) {
    core::FlowRecord f;
    f.flow = kind;
    f.src_track = src;
    f.dst_track = dst;
    f.src_ts_ns = srcTs;
    f.dst_ts_ns = dstTs;
    buf_.ring.tryPush(core::Record::from(f));
  }

 private:
  struct Open {
    core::SpanRecord rec;
    core::ArgsRecord args;
  };
  core::Session& s_;
  core::ThreadBuffer& buf_;
  int64_t t_ = core::nowNs() + 1'000'000;
  std::vector<Open> stacks_[64];
};

// Three training steps of a two-layer MLP, two microbatches each: phases, module scopes, ops with
// shapes, backward on an autograd thread with forward->backward flows, a loss counter, memory
// with categories.
int writeSample(const std::string& path) {
  core::Session session;
  trace::ShardOptions opt;
  opt.path = path;
  opt.command = "trace_schema_doc --sample " + path;
  opt.chunk_rows = 16;  // small chunks, so span_chunks has something to show
  trace::ShardWriter writer(session, opt);
  auto& buf = session.threadBuffer("main");
  const core::TrackId main = buf.track;
  const core::TrackId autograd = session.tracks().add(core::TrackKind::kThread, 0, "autograd");
  Emitter e(session, buf);
  int64_t live = 0;
  uint64_t ptr = 0x7f0000000000;
  for (const char* p : {"fc1.weight", "fc2.weight"}) {
    e.memory(1 << 20, live, core::MemoryCategory::kParameter, ptr += 0x100000, p);
  }
  int64_t seq = 0;
  for (int step = 0; step < 3; ++step) {
    e.open(main, "step", core::Category::kPhase);
    e.arg(main, "step", step);
    for (int mb = 0; mb < 2; ++mb) {
      e.open(main, "forward", core::Category::kPhase);
      e.arg(main, "microbatch", mb);
      std::vector<std::pair<int64_t, int64_t>> fwd;  // (addmm start, seq)
      for (const char* layer : {"model.fc1", "model.fc2"}) {
        e.open(main, layer, core::Category::kModule);
        e.open(main, "aten::linear", core::Category::kOp, "[[64, 512], [512, 512], [512]]");
        fwd.emplace_back(e.now(), seq);
        e.open(main, "aten::addmm", core::Category::kOp, "[[512], [64, 512], [512, 512]]", seq++);
        e.leaf(main, "aten::empty", core::Category::kOp, 200, "[[64, 512]]");
        e.memory(64 * 512 * 4, live, core::MemoryCategory::kActivation, ptr += 0x20000,
                 "aten::addmm");
        e.close(main, 40'000);
        e.close(main, 1'000);
        e.leaf(main, "aten::relu", core::Category::kOp, 6'000, "[[64, 512]]");
        e.close(main, 800);
      }
      e.leaf(main, "aten::mse_loss", core::Category::kOp, 9'000, "[[64, 512], [64, 512]]");
      e.close(main, 500);
      e.open(main, "backward", core::Category::kPhase);
      e.arg(main, "microbatch", mb);
      for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
        e.open(autograd, "autograd::engine::evaluate_function: AddmmBackward0",
               core::Category::kBackward);
        e.flow(core::FlowKind::kForwardBackward, main, it->first, autograd, e.now());
        e.open(autograd, "AddmmBackward0", core::Category::kBackward, "", it->second);
        e.leaf(autograd, "aten::mm", core::Category::kOp, 45'000, "[[64, 512], [512, 512]]");
        e.leaf(autograd, "aten::mm", core::Category::kOp, 38'000, "[[512, 64], [64, 512]]");
        e.close(autograd, 2'000);
        e.leaf(autograd, "torch::autograd::AccumulateGrad", core::Category::kBackward, 7'000);
        e.close(autograd, 1'000);
        e.memory(-64 * 512 * 4, live, core::MemoryCategory::kActivation, ptr, "aten::mm");
        if (step == 0 && mb == 0) {
          e.memory(1 << 20, live, core::MemoryCategory::kGradient, ptr += 0x100000,
                   "torch::autograd::AccumulateGrad");
        }
      }
      e.close(main, 1'000);
    }
    e.open(main, "optimizer", core::Category::kPhase);
    for (int p = 0; p < 2; ++p) {
      if (step == 0) {
        e.memory(2 << 20, live, core::MemoryCategory::kOptimizerState, ptr += 0x200000,
                 "aten::zeros_like");
      }
      e.leaf(main, "aten::mul_", core::Category::kOp, 12'000, "[[512, 512]]");
      e.leaf(main, "aten::addcdiv_", core::Category::kOp, 15'000, "[[512, 512]]");
    }
    e.close(main, 2'000);
    e.counter("loss", 1.0 / (1.0 + step));
    e.close(main, 1'000);
    e.advance(20'000);
  }
  writer.close();
  std::cout << path << ": sample trace written (" << writer.counts().spans << " spans)\n";
  return 0;
}

int rewriteDoc(const std::string& path) {
  using trace::schema::markdown;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot open\n";
    return 1;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string begin = "<!-- schema:begin -->\n";
  const std::string end = "<!-- schema:end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) {
    std::cerr << path << ": no '<!-- schema:begin -->' ... '<!-- schema:end -->' section\n";
    return 1;
  }
  const std::string out = doc.substr(0, b + begin.size()) + markdown() + doc.substr(e);
  if (out == doc) {
    std::cout << path << ": schema section already up to date\n";
    return 0;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  std::cout << path << ": schema section rewritten\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: trace_schema_doc docs/trace-format.md | --print | --sample OUT.db\n";
  try {
    if (argc == 2 && std::strcmp(argv[1], "--print") == 0) {
      std::cout << trace::schema::markdown();
      return 0;
    }
    if (argc == 3 && std::strcmp(argv[1], "--sample") == 0) return writeSample(argv[2]);
    if (argc == 2 && argv[1][0] != '-') return rewriteDoc(argv[1]);
  } catch (const trace::TraceError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cerr << usage;
  return 2;
}
