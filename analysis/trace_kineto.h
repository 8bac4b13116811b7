/* trace_kineto.h: `vitbench trace PATH --format kineto`: a timeline as
 * Kineto-style traces (what the PyTorch profiler writes), one file per rank,
 * for Holistic Trace Analysis (HTA) and other tools that read those.
 * docs/traces.md explains the mapping for users; trace_kineto.c has it in
 * full.
 */
#ifndef VB_ANALYSIS_TRACE_KINETO_H
#define VB_ANALYSIS_TRACE_KINETO_H

#include "analysis/breakdown.h"
#include "core/util/outdir.h"

typedef struct {
    const char *source;   /* the timeline.csv (recorded in each file) */
    const char *backend;  /* run.json comm_backend, or NULL */
    int world_size;       /* run.json ranks, at least the timeline's */
} vb_kineto_opts;

typedef struct {
    int files;            /* rank files written */
    long device_events;   /* on streams (real or pseudo) */
    int max_streams;      /* most streams of one rank */
    int steps;            /* ProfilerStep spans of the rank with most */
    int stale_removed;    /* rank files of an earlier export removed */
    int cpu_ranks;        /* ranks whose device lanes are CPU ops (pseudo-streams) */
} vb_kineto_stats;

/* Writes dir/rank<r>.pt.trace.json for every rank that has events (dir
 * opened by outdir.h's rule: a real directory, files by rename). Exits 2
 * naming dir when it holds another .json or .gz file (HTA reads every one
 * there as a rank's trace); exits naming the file when one cannot be
 * written; removes rank<N>.pt.trace.json files of an earlier export whose
 * rank this timeline does not have. */
void vb_kineto_write(const vb_timeline *t, const vb_outdir *dir, const vb_kineto_opts *o, vb_kineto_stats *st);

#endif
