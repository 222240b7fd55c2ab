/* No-op stand-ins for libtracerun's annotation entry points, so bench/python_module_hooks.py
 * measures the Python side of the module hooks alone. Not used by any test or by tracerun. */
#include <stdint.h>
int tracerun_annotate_capturing(void) { return 1; }
int64_t tracerun_annotate_scope_begin(int kind, const char* name, const char* detail, void* args,
                                      int nargs) {
  (void)kind; (void)name; (void)detail; (void)args; (void)nargs;
  return 1;
}
void tracerun_annotate_scope_end(int64_t token, const char* detail) { (void)token; (void)detail; }
