// placeholder: being written (see include/tracerun/trace/reader.h)
