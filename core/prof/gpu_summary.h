/* gpu_summary.h: per-name summaries of GPU activities in the format of
 * `nsys stats --format csv`.
 *
 * Records (a name, a start and an end in nanoseconds) are added one by one;
 * a summary renders them as one row per distinct name with the columns of
 *   cuda_gpu_kern_sum     Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),
 *                         Min (ns),Max (ns),StdDev (ns),Name
 *   cuda_gpu_mem_time_sum Time (%),Total Time (ns),Count,Avg (ns),Med (ns),
 *                         Min (ns),Max (ns),StdDev (ns),Operation
 * sorted by total time, largest first (ties by name, so the order is stable).
 * Time (%) is the row's share of the summary's summed time; Avg the mean,
 * Med the median (the mean of the two middle durations for an even count),
 * StdDev the sample standard deviation (n - 1 in the denominator, 0 for a
 * single instance), as nsys computes them. Numbers are printed the way nsys
 * prints them: percentages, means, medians and deviations with one decimal,
 * totals, minima and maxima as integers; names quoted per RFC 4180 when they
 * hold a comma, a quote or a line break. `vitbench nsys` reads the result
 * back like a report nsys wrote.
 *
 * No CUDA here: the CUPTI tracer (cupti_trace.h) feeds it, and the unit
 * tests run it on the CPU. Not thread-safe: callers serialize.
 */
#ifndef VB_GPU_SUMMARY_H
#define VB_GPU_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    VB_GSUM_KERNELS = 0, /* cuda_gpu_kern_sum's header (Instances, Name) */
    VB_GSUM_MEMOPS = 1,  /* cuda_gpu_mem_time_sum's header (Count, Operation) */
} vb_gsum_format;

typedef struct vb_gsum vb_gsum;

/* One row of a summary; name points into the summary (valid until it changes). */
typedef struct vb_gsum_row {
    const char *name;
    double time_pct;
    uint64_t total_ns;
    uint64_t instances;
    double avg_ns, med_ns;
    uint64_t min_ns, max_ns;
    double stddev_ns;
} vb_gsum_row;

/* NULL when out of memory. */
vb_gsum *vb_gsum_create(void);
void vb_gsum_destroy(vb_gsum *g);
/* Drops every record (keeps the allocations). */
void vb_gsum_reset(vb_gsum *g);

/* Adds one activity. A record whose end precedes its start (CUPTI leaves
 * both 0 for an activity it could not time) is skipped and returns 1.
 * Returns 0 when added, -1 when out of memory (the record is lost). */
int vb_gsum_add(vb_gsum *g, const char *name, uint64_t start_ns, uint64_t end_ns);

/* Distinct names and records so far. */
size_t vb_gsum_names(const vb_gsum *g);
uint64_t vb_gsum_records(const vb_gsum *g);

/* The rows, sorted as in the CSV, into a malloc'd array the caller frees
 * (*rows NULL when there are none). Returns the row count, or (size_t)-1
 * when out of memory. Sorts the stored durations (for the medians). */
size_t vb_gsum_rows(vb_gsum *g, vb_gsum_row **rows);

/* The CSV (header and rows) as a malloc'd C string, NULL when out of
 * memory. display, when not NULL, maps a stored name to the name to print:
 * a malloc'd string the summary frees, or NULL to print the stored name
 * (the CUPTI tracer demangles kernel names this way). */
char *vb_gsum_csv(vb_gsum *g, vb_gsum_format fmt, char *(*display)(const char *name));

#endif
