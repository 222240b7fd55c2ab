// placeholder: being written (see include/tracerun/trace/shard_writer.h)
