/* scaling_ref.h: compute references that are not one-rank run directories:
 * a step time measured elsewhere (a published single-GPU figure, a run on
 * another system) with the shares of the step its ops took.
 *
 *   what: "SC25 README: batch 16, bf16, fused Adam, torch.compile, one H100 NVL"
 *   model: {embed_dim: 384, depth: 12, num_heads: 8, patch_size: 8,
 *           img_size: [360, 720], n_in_channels: 20, n_out_channels: 20}
 *   amp: bf16                   # none | bf16 | fp16: activation bytes
 *   precision: bf16             # fp32 | tf32 | bf16 | fp16: the peak its GEMMs ran
 *                               #   against (default: fp32 for none, else amp)
 *   machine: ../machines/h100-nvl-pair.yaml   # where it ran (optional; relative
 *                               #   paths are relative to this file); a list when the
 *                               #   source leaves the machine open: [a.yaml, b.yaml]
 *   implementation: tutorial-sc25-compiled    # the code that ran (scaling_price.h;
 *                               #   default vitbench's own)
 *   local_batch: 16
 *   samples_per_s: [126.302508, 125.191755]   # or step_s: [...]; several
 *                               #   measurements give the spread
 *   layout: {tp: 1, cp: 1, dp: 2, order: tp-cp-dp}   # optional: the run was not
 *                               #   one rank; its compute is solved for (below)
 *   op_shares: {attention_forward: 0.17, ...}  # optional: share of the step
 *
 * Op shares. Without op_shares every op of the ViT gets the share of the
 * step its FLOPs have (forward GEMMs 2 m n k, backward GEMMs 2x forward;
 * attention 4 N^2 D forward and 2.5x that backward: fused attention's
 * backward runs five products to the forward's two, recomputing Q K^T, as
 * the cuDNN kernels time on an H100, 3.05 against 1.21 ms a call in
 * results/baselines/gpu/h100_2026-11-27.md; element-wise ops, Adam and data
 * movement 0): the reference is then a rate, every FLOP at the same speed.
 * Once its machine is known and prices ops (vb_mref_price), the shares are
 * the priced ones instead: each op by what bounds it (scaling_price.h), the
 * step measured. With op_shares, each listed op gets its share, and what is
 * left of the step goes to one op that no layout shards ("unattributed").
 *
 * A reference of another model size (model dims differ from a prediction's)
 * is rescaled op by op by the ratio of the op's FLOPs (element count for ops
 * without FLOPs, parameters for Adam): vb_mref_rescale.
 *
 * A reference measured on several ranks (layout) is one rank's compute times
 * a factor c solved so that the model's own prediction of that layout gives
 * the measured step (vb_mref_calibrate); its communication is then the model's
 * and only the compute speed is taken from the measurement.
 */
#ifndef VB_ANALYSIS_SCALING_REF_H
#define VB_ANALYSIS_SCALING_REF_H

#include "analysis/scaling/scaling_model.h"
#include "analysis/scaling/scaling_yaml.h"

/* Half the central 95% range of v (linear quantiles) over its median: the
 * relative spread of a reference's steps; 0 for fewer than 2 values. Sorts v. */
double vb_rel_spread(double *v, int n);

/* dims from a YAML mapping (embed_dim, depth, num_heads, patch_size,
 * img_size [H, W], n_in_channels, n_out_channels); exits 2 on bad values. */
void vb_mdims_from_yaml(const vb_my *y, yaml_node_t *node, const char *where, vb_mdims *out);

#define VB_MREF_MAX_MACHINES 4
#define VB_MREF_PATH 1024

/* `machine:` of mapping p: one file, or a list of the files it may have been
 * (an interconnect the source leaves open), each resolved against dir into
 * files; returns how many (0: absent). A list of none or more than
 * VB_MREF_MAX_MACHINES, or an item that is not a file name, exits 2. */
int vb_my_machine_files(const vb_my *y, const vb_yaml_pairs *p, const char *where, const char *dir,
                        char files[VB_MREF_MAX_MACHINES][VB_MREF_PATH]);

typedef struct vb_mref_src {
    vb_mlayout layout;        /* the reference's own layout (1 x 1 x 1 unless given) */
    char machine[VB_MREF_PATH]; /* its machine file ("" when not given), resolved against the file's directory */
    char machines[VB_MREF_MAX_MACHINES][VB_MREF_PATH]; /* every file `machine:` lists (machine is the first) */
    int nmachines;
    double step_s;            /* median measured step */
} vb_mref_src;

/* A reference from its YAML mapping (node), `where` naming it in messages,
 * `dir` the directory relative paths start from, `models` an optional
 * mapping of named dims (model: NAME looks there). Fills out (one batch,
 * synthesized ops) and src. */
void vb_mref_from_yaml(const vb_my *y, yaml_node_t *node, yaml_node_t *models, const char *where, const char *dir,
                       vb_mref *out, vb_mref_src *src);

/* `vitbench model --reference FILE`: a file holding one such mapping. */
void vb_mref_load_file(const char *path, vb_mref *out, vb_mref_src *src);

/* A reference of FLOP shares priced on m (its machine): each op's share
 * becomes its price's, and every later prediction prices its own layout
 * (scaling_model.h's price_factor). Nothing happens when m cannot price
 * (no memory_GBps: FLOP shares stay) or the reference has op shares or
 * several batches. */
void vb_mref_price(vb_mref *ref, const vb_machine *m);

/* out = ref rescaled to the model dims `to` (see above; a priced reference
 * prices the new dims at each prediction); out->ops is new. */
void vb_mref_rescale(const vb_mref *ref, const vb_mdims *to, vb_mref *out);

/* Scales m->ref (which must be writable: ref) so that the nominal prediction
 * of layout l is step_s; returns the factor applied. Exits 2 when no factor
 * in (0, 1e3] reaches it (the layout's communication alone is slower). */
double vb_mref_calibrate(vb_mctx *m, vb_mref *ref, const vb_mlayout *l, double step_s);

/* Multiplies every time of ref by c. */
void vb_mref_scale(vb_mref *ref, double c);

#endif
