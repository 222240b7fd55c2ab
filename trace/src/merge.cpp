// placeholder: being written (see include/tracerun/trace/merge.h)
