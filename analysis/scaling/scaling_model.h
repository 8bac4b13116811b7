/* scaling_model.h: `vitbench model`, an alpha-beta model of a training step under
 * any tp x cp x dp layout, from what is known about a machine:
 *
 *   commbench.csv   (vitbench commbench) collective times per size and group
 *   a machine file  (--machine, machine.h) the hierarchy's links, for every
 *                   group size nobody measured (a cluster not yet booked)
 *   a reference     the compute of one rank: a one-rank run (vitbench run, CPU
 *                   or CUDA), one-rank runs of tp x cp shards (bench_step
 *                   --shard_tp/--shard_cp --reference_dir), or a step time with
 *                   op shares from elsewhere (--reference FILE, scaling_ref.c)
 *   a sweep         (vitbench sweep) the layouts to predict and what they measured
 *
 * Pieces (one file each):
 *   scaling_fit.c       latency / bandwidth fits of the ring cost forms per
 *                       (collective, group, group size), read from commbench.csv
 *   scaling_place.c,    where a layout's groups sit on the machine's levels and
 *   scaling_comm.c      what a collective costs there (scaling_comm.h)
 *   scaling_ref.c       references from a step time and op shares (YAML)
 *   scaling_price.c     one rank's ops priced by what bounds them on a machine,
 *                       for the implementation that runs them (scaling_price.h)
 *   scaling_predict.c   a step's compute, exposed tp / cp / DDP communication and
 *                       time for one layout, under knobs (interval corners, beta
 *                       multipliers for the sensitivity)
 *   scaling_published.c the tutorials' published scaling results beside the model
 *   scaling_model.c     the command: inputs, every sweep point or hypothetical
 *                       layout, intervals and sensitivity, model.csv / model.md
 *
 * Cost forms (p ranks in the group, n bytes as nccl-tests counts them: the
 * whole logical buffer; alpha in microseconds, beta in GB/s = 1e9 bytes/s):
 *   allreduce       t = 2(p-1) alpha + 2(p-1)/p n/beta   (ring)
 *   allgather       t =  (p-1) alpha +  (p-1)/p n/beta   (ring; n = gathered output)
 *   reduce_scatter  t =  (p-1) alpha +  (p-1)/p n/beta   (ring; n = full input)
 *   broadcast       t =        alpha +          n/beta   (pipelined: one latency, the
 *                                                          buffer once over a link)
 * A group of size 1 costs nothing.
 */
#ifndef VB_ANALYSIS_SCALING_MODEL_H
#define VB_ANALYSIS_SCALING_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "analysis/scaling/machine.h"

/* ---- alpha-beta fits (scaling_fit.c) ---- */
typedef enum { VB_COLL_ALLREDUCE, VB_COLL_ALLGATHER, VB_COLL_REDUCE_SCATTER, VB_COLL_BROADCAST, VB_NCOLL } vb_coll;
extern const char *const vb_coll_name[VB_NCOLL];
/* "allreduce" ... -> VB_COLL_*, else -1 */
int vb_coll_of(const char *name);

/* t_us = a * alpha_us + b * bytes / (beta_GBps * 1e3): the form's
 * coefficients a (latency terms) and b (bandwidth share) for p ranks. */
void vb_ab_coeffs(int coll, int p, double *a, double *b);

typedef struct vb_ab_fit {
    int coll;           /* VB_COLL_* */
    char group[16];     /* tp, cp, dp, cpdp, world ... as commbench named it */
    int p;              /* group size */
    int world;          /* ranks of the commbench run (group_size x ngroups; 0 unknown) */
    double alpha_us;    /* latency per step of the form, >= 0 */
    double beta_GBps;   /* bandwidth; INFINITY when the fit finds no size dependence */
    double rel_rms;     /* sqrt(mean(((fit - measured) / measured)^2)) over the sizes */
    int nsizes;
} vb_ab_fit;

/* Least squares of the form on (bytes[i], t_us[i]), i < n, weighted by
 * 1/t^2 so that each size counts by its relative error (small messages fix
 * alpha, large ones beta). A negative alpha or 1/beta (noise) is clamped to
 * 0 and the other refitted alone. Returns 0; -1 with the reason in err when
 * fewer than two distinct sizes, p < 2, or a time is not > 0. */
int vb_ab_fit_points(int coll, int p, const double *bytes, const double *t_us, int n, vb_ab_fit *out, char *err,
                     size_t errn);

/* Seconds the fitted form gives for `bytes` over p ranks (0 when p <= 1). */
double vb_ab_seconds(const vb_ab_fit *f, int p, double bytes);

typedef struct vb_ab_table {
    vb_ab_fit *fits;
    int n;
    /* commbench --beside_gemm: the slowdown of a GEMM beside each size's
     * collective, for the sizes whose collective lasted a GEMM or more */
    double *slowdowns;
    int nslowdowns;
} vb_ab_table;

/* Reads commbench.csv (a file, or a directory holding it) rows, takes per
 * (collective, group, group_size, size_bytes) the slowest rank's time_us
 * (the slowest rank gates a collective), and fits each (collective, group,
 * group_size); appends to t. Rows with wrong != 0 are refused. Bad input
 * (missing file or column, too few sizes) exits 2 naming the file. */
void vb_ab_load(const char *path, vb_ab_table *t);
/* The median of t's measured overlap slowdowns (0 when the median is below
 * 0: no slowdown seen), or -1 when no file measured one. */
double vb_ab_overlap_slowdown(const vb_ab_table *t);
void vb_ab_free(vb_ab_table *t);

/* The fit for collective `coll` over a group of p ranks in a world of
 * `world` ranks (0: any): the same group kind, size and world, else any
 * group of that size and world, else the same kind and size at another
 * world, else any group of that size (a node shared by more ranks times its
 * collectives differently, so the same world is preferred), else (flagging
 * *extrapolated) the measured size nearest p, larger preferred -- per-link
 * alpha and beta then carry over through the ring form. NULL when the
 * collective was never measured. */
const vb_ab_fit *vb_ab_lookup(const vb_ab_table *t, int coll, const char *group, int p, int world,
                              bool *extrapolated);

/* ---- the step model (scaling_predict.c) ---- */

/* Single communication channel overlapped with backward: bucket i is ready
 * at ready_s[i] (seconds from the start of backward), starts at
 * max(ready_s[i], end of bucket i-1) and takes dur_s[i]. Returns the exposed
 * time max(0, end_last - bwd_end_s); *end_last_s gets end_last (0 when n == 0). */
double vb_overlap_exposed(const double *ready_s, const double *dur_s, int n, double bwd_end_s, double *end_last_s);

/* Scaling efficiency from step times: weak (fixed local batch) T1 / Tp,
 * strong (fixed global batch over p ranks) T1 / (p Tp). NaN for bad input. */
double vb_eff_weak(double t1_s, double tp_s);
double vb_eff_strong(double t1_s, double tp_s, int p);

/* The model's view of the ViT (core/model/vit.c). */
typedef struct vb_mdims {
    int dim, depth, heads, patch, img_h, img_w, cin, cout;
} vb_mdims;

/* One-rank steps, from ops.csv, at one or more local batch sizes (one
 * reference run each): each op's seconds per step at every reference batch
 * and its calls per step. */
#define VB_MODEL_MAX_REFS 8
typedef struct vb_mop {
    char name[64];
    double step_s[VB_MODEL_MAX_REFS]; /* total_s / timed steps, per reference (0: not run there) */
    double calls;                     /* calls per step (batch-independent) */
} vb_mop;

typedef struct vb_mref {
    char what[160];   /* names the reference in outputs (a path, a published figure) */
    vb_mdims d;
    int nref;
    int batch[VB_MODEL_MAX_REFS];     /* the references' local batch, ascending */
    double step_s[VB_MODEL_MAX_REFS]; /* their median timed step */
    int threads;      /* the references' OpenMP threads */
    int node_ranks;   /* ranks on their node (1) */
    int cores;        /* cores the node offers its ranks */
    int act_bytes;    /* bytes per activation element (4: float32, 2: bfloat16) */
    int prec;         /* vb_prec of its GEMMs (fp32, tf32, bf16, fp16): which peak it ran against */
    int shard_tp, shard_cp; /* 1, 1; a shard reference: the tp x cp shard one rank ran (bench_step --shard_*) */
    bool gpu;         /* a run of the CUDA backend: --machine's GPUs describe where its compute ran, so its
                         GEMMs and attention are repriced at other shapes there (a CPU run's are not) */
    double spread;    /* relative uncertainty of its step: half the central 95% range of its steps over their median */
    vb_mop *ops;
    int nops;
    /* A reference from elsewhere priced op by op (scaling_price.h, vb_mref_price):
     * every prediction prices its own layout's ops on the machine it runs on and
     * multiplies them by price_factor, the measured step over the priced one at
     * the reference's own point (batch[0], tp 1, cp 1, price_machine, impl). */
    bool flop_shares;                  /* ops are FLOP shares of the step (no op_shares given) */
    const struct vb_impl *impl;        /* the code its measurement ran (NULL: vitbench's own) */
    const vb_machine *price_machine;   /* where it was priced (NULL: not priced) */
    double price_factor;               /* > 0 when priced */
    vb_mdims price_dims;               /* the dims it was measured with */
} vb_mref;

/* The model's tokens (patches of the image), the largest cp shard of them
 * (vit_token_split's: the slowest rank gates the step), and whether two
 * model descriptions are the same model. */
int vb_mdims_ntok(const vb_mdims *d);
int vb_tokens_local(int ntok, int cp);
bool vb_mdims_equal(const vb_mdims *a, const vb_mdims *b);

/* A per-sample quantity measured at the references' batches (v[i] at
 * batch[i]) at batch b: linear between the two references around b,
 * proportional to b beyond the smallest or largest (one reference: v[0] x
 * b / batch[0]). With proportional false, constant beyond them instead. */
double vb_mref_at_batch(const vb_mref *r, const double *v, double b, bool proportional);

typedef struct vb_mlayout {
    int tp, cp, dp;
    int local_batch;
    int threads;      /* OpenMP threads per rank */
    int node_ranks;   /* ranks sharing the node's cores */
    int cores;
    double bucket_cap_mb;
    bool noddp;
    char order[16];   /* parallel_order ("" = tp-cp-dp): which groups are neighbours */
} vb_mlayout; /* world = tp x cp x dp */

typedef enum { VB_DDP_OVERLAP, VB_DDP_AFTER_BACKWARD } vb_ddp_mode;

typedef struct vb_mpred {
    double cpu_factor;   /* compute multiplier from threads and oversubscription */
    double compute_u;    /* relative uncertainty the compute carried at the interval's corners */
    double forward_s, backward_s, other_s, compute_s;
    double ddp_comm_s;   /* every bucket's allreduce, summed */
    double exposed_ddp_s, exposed_tp_s, exposed_cp_s;
    double step_s;
    double samples_per_s; /* local batch x dp / step */
    int nbuckets;
    bool extrapolated;   /* a fit for another group size was used */
    char compute_ref[192]; /* which reference priced the compute, and how */
    char comm_src[200];    /* per group: commbench or the machine level that priced it */
} vb_mpred;

/* Knobs of one evaluation (a zeroed struct with vb_mknobs_nominal's values
 * is the plain prediction). */
typedef struct vb_mknobs {
    int corner;          /* 0 nominal; -1 / +1: every input at the fast / slow end of its uncertainty
                            (the reference's spread, each fit's rel. RMS, each level's uncertainty),
                            by vb_corner_factor */
    double compute_mul;  /* the reference's compute times this (1) */
    double beta_mul[VB_MACHINE_MAX_LEVELS]; /* beta of each level times this (1): the sensitivity */
} vb_mknobs;
void vb_mknobs_nominal(vb_mknobs *k);

/* The compute of a rank at scale, against the one-rank reference it is
 * scaled from, is known to at least this relative uncertainty: the
 * run-to-run floor of a step measured on the development machine (a
 * reference whose own steps spread wider uses its spread). The efficiency's
 * interval takes T1 and Tp at opposite ends of it, since scaling compute to a
 * layout (shards, batch, threads) is the model's assumption, not a shared
 * measurement that cancels in T1 / Tp. */
#define VB_MODEL_COMPUTE_UNCERTAINTY 0.05

/* The factor an input with relative uncertainty u takes at a corner: 1 + u
 * at the slow end, 1 / (1 + u) at the fast end (a bandwidth known to a
 * factor of 2 is u = 1), 1 at the nominal point. */
double vb_corner_factor(int corner, double u);

/* Everything a prediction reads besides the layout. */
typedef struct vb_mctx {
    const vb_mref *ref;           /* the one-rank reference */
    const vb_mref *shards;        /* one-rank runs of tp x cp shards (may be none) */
    int nshards;
    const vb_ab_table *fits;      /* commbench (may be NULL or empty) */
    const vb_machine *machine;    /* NULL: commbench alone */
    vb_ddp_mode mode;
    double compute_scale;         /* reference machine's peak / this machine's (1: the same machine; a
                                     priced reference is priced on `machine` instead) */
    const struct vb_impl *impl;   /* the code the prediction runs (NULL: the reference's, else vitbench's) */
} vb_mctx;

/* A layout the config cannot take (heads % tp, cp > tokens, ...): 0, else -1
 * with the reason in err. */
int vb_model_check_layout(const vb_mdims *d, const vb_mlayout *l, char *err, size_t errn);

/* Predicts one step of layout l (checked) under knobs kn (NULL: nominal).
 * Collectives are priced by scaling_comm.h (exits 2 naming a collective that
 * neither commbench nor a machine file prices; a group the machine's levels
 * cannot hold exits 2 too). A shard reference of l's tp x cp, when m has
 * one, replaces the scaled per-op times of the ops it ran. */
void vb_model_predict(const vb_mctx *m, const vb_mlayout *l, const vb_mknobs *kn, vb_mpred *out);

/* The command (scaling_model.c). */
int vb_model_main(int argc, char **argv);

/* `vitbench model --published FILE` (scaling_published.c): every row of the
 * tutorials' published results the model can represent, predicted beside
 * published with the error; published.csv and published.md into out_dir
 * (NULL: results/published_<time>); returns the exit status (0). */
int vb_model_published(const char *file, const char *out_dir);

#endif
