// analyzeGpu (see gpu.h): reads the streams once and runs the GPU analyses over them, one device
// at a time, then the kernel table and the stragglers across ranks. Computes nothing itself.
#include "tracerun/trace/analysis/gpu.h"

#include "gpu_activity.h"

namespace tracerun::trace::analysis {

bool gpuStreamTrack(std::string_view track_name, int* device, int64_t* stream) {
  int d = 0;
  int64_t s = 0;
  if (!gpu::parseStreamTrackName(track_name, &d, &s)) return false;
  if (device) *device = d;
  if (stream) *stream = s;
  return true;
}

const GpuDevice* GpuAnalysis::device(int rank, int dev) const {
  for (const GpuDevice& d : devices) {
    if (d.rank == rank && d.device == dev) return &d;
  }
  return nullptr;
}

GpuAnalysis analyzeGpu(const TraceReader& reader, const GpuOptions& options) {
  GpuAnalysis out;
  out.options = options;
  const std::vector<gpu::StreamActivities> streams = gpu::readActivities(reader, -1, options.rank);
  // Streams come by rank, then device: each run of one (rank, device) is a device.
  for (size_t i = 0; i < streams.size();) {
    std::vector<const gpu::StreamActivities*> dev;
    size_t j = i;
    for (; j < streams.size() && streams[j].rank == streams[i].rank &&
           streams[j].device == streams[i].device;
         ++j)
      dev.push_back(&streams[j]);
    out.devices.push_back(gpu::analyzeDevice(dev, options));
    for (GpuCopyKind& c : out.devices.back().copy_kinds) c.name = reader.str(c.name_id);
    i = j;
  }
  out.kernels = gpu::kernelTable(reader, streams);
  out.stragglers = gpu::stragglers(streams, AttemptRanks(reader), &out.collectives);
  return out;
}

}  // namespace tracerun::trace::analysis
