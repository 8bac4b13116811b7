/* analysis.h: the commands that turn result directories into answers.
 *
 *   vitbench report PATH             report.md / report.html / tables / plots (report.c)
 *   vitbench compare BASE NEW        noise-aware comparison and regression gate (compare.c)
 *   vitbench trace PATH              Chrome trace (trace.json) from timeline.csv (trace.c)
 *   vitbench nsys FILE...            import `nsys stats --format csv` reports (nsys.c)
 *   vitbench import PATH...          the tutorials' PyTorch runs (benchy JSON, logs, traces) as runs and sweeps (import.c)
 *   vitbench history FILE            change points of a machine's history (history.c);
 *   vitbench history append FILE     its row of a gate set (history_append.c)
 *
 * Each takes argv with argv[0] = the command's name and returns the process
 * exit status; bad input exits 2 with one line naming the file or flag.
 * None of them is an MPI program: they run before (instead of) MPI setup.
 */
#ifndef VB_ANALYSIS_H
#define VB_ANALYSIS_H

int vb_report_main(int argc, char **argv);
/* compare's exit status: 0 every compared metric equivalent or faster;
 * 1 a regression (slower); 2 bad input (also no samples on a side);
 * VB_COMPARE_EXIT_INCONCLUSIVE when nothing is slower but something could not
 * be told (inconclusive, or a BASE point missing or failed in NEW): the gate
 * does not pass on data that decides nothing. scripts/perf_ci.sh passes it on. */
#define VB_COMPARE_EXIT_INCONCLUSIVE 5
int vb_compare_main(int argc, char **argv);
int vb_trace_main(int argc, char **argv);
int vb_nsys_main(int argc, char **argv);
int vb_import_main(int argc, char **argv);
/* exit 0 whatever it finds (as Apache Otava: read the output), 2 for bad input */
int vb_history_main(int argc, char **argv);

#endif
