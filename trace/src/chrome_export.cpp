// placeholder: being written (see include/tracerun/trace/chrome_export.h)
