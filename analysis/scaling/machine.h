/* machine.h: a cluster described in a machine file (scenarios/machines/NAME.yaml)
 * for `vitbench model --machine FILE`: what a prediction needs to know about
 * a system nobody has measured yet.
 *
 *   name: perlmutter-gpu
 *   description: ...               # free text
 *   device: NVIDIA A100-SXM4-40GB  # what one rank computes on (free text)
 *   gpus_per_node: 4               # one rank per GPU; 0 for a CPU machine, which
 *   ranks_per_node: 2              #   then says how many ranks a node runs
 *   cores_per_node: 64
 *   peak_tflops: {fp32: 19.5, tf32: 156, bf16: 312, fp16: 312}   # dense; per GPU, or per node
 *                                  #   of a CPU machine (its cores together)
 *   memory_GBps: 1555              # the GPU's (or node's) memory bandwidth, datasheet
 *   efficiency:                    # optional: what a step's ops reach of the peaks
 *     gemm_half_width: 255         # a GEMM of narrow dimension w (its smaller feature
 *                                  #   count) reaches w / (w + this) of the peak
 *     attention: 0.45              # fused attention: executed FLOPs over the peak
 *     memory: 0.6                  # element-wise ops: bytes over memory_GBps
 *     uncertainty: 0.2             # relative: how far a repriced compute may be off
 *     overlap_slowdown: 0          # compute running beside a collective is this much
 *                                  #   slower (commbench --beside_gemm; a --commbench
 *                                  #   run that measured it wins over this)
 *   levels:                        # innermost first
 *     - name: nvlink3
 *       ranks: node                # ranks per unit of this level: an integer, `node`
 *                                  #   (the node's ranks) or `all` (the whole job; last only)
 *       alpha_us: 0.6              # latency per step of the collective's algorithm
 *       beta_GBps: 200             # bus bandwidth per rank (nccl-tests' busbw)
 *       uncertainty: 0.25          # relative: how far the figures may be off
 *       allreduce: {algorithm: nvls, alpha_us: 3, beta_GBps: 480}   # optional, per collective
 *     - name: slingshot11
 *       ranks: all
 *       alpha_us: 5
 *       beta_GBps: 24
 *       nics_per_node: 4           # network levels: the node's NICs, shared by its ranks
 *       nic_GBps: 24
 *       uncertainty: 0.3
 *
 * Contract: vb_machine_load returns a machine whose every number passed its
 * range check, whose levels grow outwards (each level's unit holds whole
 * units of the level inside it), at most one `all` level and that one last,
 * or exits 2 with one line naming the file, the key and its line. Every
 * number in a shipped file carries its source in a comment; the parser reads
 * numbers only.
 *
 * Units: alpha in microseconds per algorithm step, beta in GB/s (1e9 B/s) of
 * bus bandwidth as nccl-tests reports it, so that the ring forms of scaling_model.h
 * with beta = busbw give nccl-tests' time back.
 *
 * Efficiency: what scaling_price.h prices ops with. Every key is optional;
 * without it the op runs at the peak (gemm_half_width 0, attention and memory
 * 1), uncertainty 0 and no slowdown. A machine without memory_GBps cannot
 * price element-wise ops by their bytes (vb_machine_can_price says so).
 */
#ifndef VB_ANALYSIS_MACHINE_H
#define VB_ANALYSIS_MACHINE_H

#include <stdbool.h>

#define VB_MACHINE_MAX_LEVELS 6
#define VB_MACHINE_NCOLL 4 /* allreduce, allgather, reduce_scatter, broadcast: scaling_model.h's vb_coll */

/* The collective algorithms whose latency the model counts (scaling_comm.c). */
typedef enum { VB_ALG_RING = 0, VB_ALG_TREE, VB_ALG_NVLS, VB_NALG } vb_alg;
extern const char *const vb_alg_name[VB_NALG];

/* Precisions of peak_tflops: fp32, tf32, bf16, fp16. */
typedef enum { VB_PREC_FP32 = 0, VB_PREC_TF32, VB_PREC_BF16, VB_PREC_FP16, VB_NPREC } vb_prec;
extern const char *const vb_prec_name[VB_NPREC];

enum { VB_LEVEL_RANKS_NODE = -1, VB_LEVEL_RANKS_ALL = -2 };

typedef struct vb_mlevel {
    char name[32];
    int ranks;                             /* ranks per unit, or VB_LEVEL_RANKS_NODE / _ALL */
    double alpha_us[VB_MACHINE_NCOLL];     /* per collective (the level's default unless overridden) */
    double beta_GBps[VB_MACHINE_NCOLL];
    int alg[VB_MACHINE_NCOLL];             /* vb_alg; ring unless the file says otherwise */
    double uncertainty;                    /* relative, >= 0 */
    int nics_per_node;                     /* 0: not a network level */
    double nic_GBps;                       /* per NIC */
} vb_mlevel;

typedef struct vb_machine {
    char path[1024];
    char name[64];
    char device[96];
    int gpus_per_node;     /* 0: a CPU machine */
    int ranks_per_node;    /* gpus_per_node, or the file's ranks_per_node on a CPU machine */
    int cores_per_node;
    double peak_tflops[VB_NPREC]; /* 0: not given */
    double memory_GBps;    /* 0: not given */
    double gemm_half_width; /* GEMM efficiency w / (w + this); 0: every GEMM at the peak */
    double attn_eff;       /* fused attention's executed FLOPs over the peak (1) */
    double mem_eff;        /* element-wise bytes over memory_GBps (1) */
    double eff_uncertainty; /* relative uncertainty of a repriced compute (0) */
    double overlap_slowdown; /* compute beside a collective runs x (1 + this) (0) */
    vb_mlevel level[VB_MACHINE_MAX_LEVELS];
    int nlevels;
} vb_machine;

/* Reads and checks a machine file (exits 2 on bad input, see above). */
void vb_machine_load(const char *path, vb_machine *m);

/* Ranks per unit of level l when a node runs node_ranks ranks and the job
 * has world ranks (VB_LEVEL_RANKS_NODE -> node_ranks, _ALL -> world). */
int vb_machine_level_ranks(const vb_machine *m, int l, int node_ranks, int world);

/* Peak TFLOP/s of one rank in precision p: a GPU's; on a CPU machine the
 * node's peak times the share of its cores the rank's threads use (at most
 * all of them). 0 when the file gives no figure for p. */
double vb_machine_rank_peak(const vb_machine *m, int p, int threads);

/* Whether m can price a step op by op (scaling_price.h): it states its
 * memory bandwidth (GEMMs and attention fall back to the peak). */
bool vb_machine_can_price(const vb_machine *m);

/* "fp32" ... -> VB_PREC_*, else -1. */
int vb_prec_of(const char *name);

#endif
