/* count_region.h: the region a counting run measures. Under valgrind's
 * callgrind (scripts/perf_ci.sh --counts) only the code between
 * VB_COUNT_BEGIN and VB_COUNT_END is instrumented: instructions and cache
 * misses are counted there and nowhere else (startup, MPI, the loader's
 * files), so the count is the step's work, the same whatever the machine is
 * doing. benchy's timed SYNTHETIC and FULL steps are the region (bench/trials.c).
 * Outside valgrind the requests are a few instructions that do nothing; a
 * build without valgrind's header (valgrind/callgrind.h) has none. */
#ifndef VB_COUNT_REGION_H
#define VB_COUNT_REGION_H

#ifdef VB_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#define VB_COUNT_BEGIN() CALLGRIND_START_INSTRUMENTATION
#define VB_COUNT_END() CALLGRIND_STOP_INSTRUMENTATION
#else
#define VB_COUNT_BEGIN() ((void)0)
#define VB_COUNT_END() ((void)0)
#endif

#endif
