/* test_mpi_model.c: tensor and context parallelism inside the model, under
 * mpirun (tests/test_model_mpi.sh runs it with -np 2, 3 and 4).
 *
 * Every rank also builds the single-rank model with the same weights in the
 * same process, so each parallel result has its exact reference:
 *   - the loss and the full prediction equal the single-rank ones (1e-5 rel);
 *   - after backward, with weight gradients summed over cp (what the DDP engine
 *     does), every rank's gradient shard equals the matching slice of the
 *     single-rank gradient (1e-4 of the tensor's largest gradient);
 *   - tensors replicated over tp get the same gradient on every tp rank;
 *   - init shards are slices of the single-rank init;
 *   - a tp checkpoint is written with full state_dict shapes (a single-rank
 *     model loads it bit-exactly) and reads back into the shards.
 *
 * Layouts follow parallel_order tp-cp-dp (tp fastest): with tp 2 x cp 2 the
 * tp groups are {0,1},{2,3} and the cp groups {0,2},{1,3}. A case whose
 * world size does not match is skipped, so run without mpirun (as ctest does)
 * only the single-rank case runs. Every rank reaches every assertion with the
 * SAME (world-reduced) values, so a failure fails all ranks together instead
 * of leaving some waiting in a collective.
 */
#include "tests/test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/checkpoint.h"
#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/model/vit.h"

/* N = (16/4)*(32/4) = 32 tokens (cp 3: 11 11 10), D 32, 4 heads of 8, hidden 128 */
static const vit_dims DIMS = {.img_h = 16, .img_w = 32, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 32, .depth = 2, .heads = 4, .ln_eps = 1e-6f};
enum { MAXB = 3, B = 2 }; /* B < max_batch: runtime offsets, not allocation sizes */

static vb_comm g_world;

static size_t in_numel(void) { return (size_t)B * DIMS.cin * DIMS.img_h * DIMS.img_w; }
static size_t out_numel(void) { return (size_t)B * DIMS.cout * DIMS.img_h * DIMS.img_w; }

/* The whole local buffer of `m` as slices of the single-rank buffer `full`
 * (laid out like `one`). */
static void expected_buffer(const vit_model *m, const vit_model *one, const float *full, float *out) {
    for (int i = 0; i < m->ntensors; i++)
        tu_expected_shard(&m->tensors[i], full + one->tensors[i].offset, out + m->tensors[i].offset);
}

static int g_ready_calls;
static void count_ready(void *ctx, int index) {
    (void)ctx, (void)index;
    g_ready_calls++;
}

typedef struct {
    int tp, cp, tp_rank, cp_rank;
    MPI_Comm tp_mpi, cp_mpi;
    vb_comm tpc, cpc;
    vit_parallel par;
} layout;

/* tp-cp-dp order: tp fastest. Builds the groups with MPI_Comm_split directly
 * (independent of the harness's group code). */
static void make_layout(layout *L, int tp, int cp) {
    memset(L, 0, sizeof *L);
    L->tp = tp, L->cp = cp;
    L->tp_rank = g_world.rank % tp;
    L->cp_rank = (g_world.rank / tp) % cp;
    const int dp_rank = g_world.rank / (tp * cp);
    /* tp group: same cp and dp coordinates; cp group: same tp and dp */
    VB_MPI(MPI_Comm_split(MPI_COMM_WORLD, dp_rank * cp + L->cp_rank, L->tp_rank, &L->tp_mpi));
    VB_MPI(MPI_Comm_split(MPI_COMM_WORLD, dp_rank * tp + L->tp_rank, L->cp_rank, &L->cp_mpi));
    L->tpc = (vb_comm){.rank = L->tp_rank, .size = tp, .handle = &L->tp_mpi, .prof = NULL};
    L->cpc = (vb_comm){.rank = L->cp_rank, .size = cp, .handle = &L->cp_mpi, .prof = NULL};
    L->par = (vit_parallel){.tp_size = tp, .tp_rank = L->tp_rank, .cp_size = cp, .cp_rank = L->cp_rank,
                            .tp = tp > 1 ? &L->tpc : NULL, .cp = cp > 1 ? &L->cpc : NULL};
}

static void free_layout(layout *L) {
    VB_MPI(MPI_Comm_free(&L->tp_mpi));
    VB_MPI(MPI_Comm_free(&L->cp_mpi));
}

/* world max of a local error measure: every rank asserts on the same value */
static double world_max(double v) {
    vb_allreduce_max_f64(&g_world, &v, 1);
    return v;
}

/* Per tensor: max |got - want| / max(max |want|, floor). */
static double worst_tensor_err(const vit_model *m, const float *got, const float *want, double floor,
                               char *worst_name, size_t n) {
    double worst = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const vit_tensor *t = &m->tensors[i];
        double scale = floor, diff = 0;
        for (size_t j = 0; j < t->numel; j++) scale = fmax(scale, fabs(want[t->offset + j]));
        for (size_t j = 0; j < t->numel; j++) diff = fmax(diff, fabs(got[t->offset + j] - want[t->offset + j]));
        if (diff / scale > worst) {
            worst = diff / scale;
            snprintf(worst_name, n, "%s", t->name);
        }
    }
    return worst;
}

/* Saves a checkpoint from the parallel model (collective over tp, cp rank 0
 * only) and checks it against the single-rank state: loads into a
 * single-rank model and into a fresh parallel one. */
static void check_checkpoint(layout *L, const vit_model *one, const vit_model *pm) {
    char dir[256] = {0}, path[320];
    if (g_world.rank == 0) tu_tmpdir(dir, sizeof dir, "mpimodel");
    vb_broadcast(&g_world, dir, sizeof dir, 0);
    snprintf(path, sizeof path, "%s/ckpt.h5", dir);

    /* Adam moments: slices of full random arrays, identical on every rank */
    const size_t nfull = one->nparams;
    float *mfull = vb_malloc(sizeof(float) * nfull), *vfull = vb_malloc(sizeof(float) * nfull);
    tu_fill_uniform(mfull, nfull, -1, 1, 901);
    tu_fill_uniform(vfull, nfull, 0, 1, 902);
    vb_ctx *ctx = tu_ctx();
    vb_adam opt;
    vb_adam_init(&opt, pm->nparams, ctx);
    float *mshard = vb_malloc(sizeof(float) * pm->nparams), *vshard = vb_malloc(sizeof(float) * pm->nparams);
    expected_buffer(pm, one, mfull, mshard);
    expected_buffer(pm, one, vfull, vshard);
    tu_h2d(ctx, opt.m, mshard, sizeof(float) * pm->nparams);
    tu_h2d(ctx, opt.v, vshard, sizeof(float) * pm->nparams);
    vb_free(mshard), vb_free(vshard);
    opt.step = 5;
    if (L->cp_rank == 0) vb_checkpoint_save(path, pm, &opt); /* the tp group(s) of cp rank 0 */
    vb_barrier(&g_world);

    double bad_full = 0, bad_shard = 0;
    /* the file has full state_dict shapes and the single-rank optimizer layout */
    vit_model *one2 = vit_create(&DIMS, NULL, 1, ctx, NULL);
    vb_adam o1;
    vb_adam_init(&o1, one2->nparams, ctx);
    vb_checkpoint_load(path, one2, &o1);
    float *h = vb_malloc(sizeof(float) * nfull);
    if (tu_dev_cmp(ctx, one2->params, one->params, sizeof(float) * nfull) != 0) bad_full = 1;
    tu_d2h(ctx, h, o1.m, sizeof(float) * nfull);
    if (memcmp(h, mfull, sizeof(float) * nfull) != 0) bad_full = 2;
    tu_d2h(ctx, h, o1.v, sizeof(float) * nfull);
    if (memcmp(h, vfull, sizeof(float) * nfull) != 0) bad_full = 3;
    if (o1.step != 5) bad_full = 4;
    vb_free(h);
    /* and reads back into the shards */
    vit_model *pm2 = vit_create(&DIMS, &L->par, 1, ctx, NULL);
    vb_adam o2;
    vb_adam_init(&o2, pm2->nparams, ctx);
    vb_checkpoint_load(path, pm2, &o2);
    if (tu_dev_cmp(ctx, pm2->params, pm->params, sizeof(float) * pm->nparams) != 0) bad_shard = 1;
    if (tu_dev_cmp(ctx, o2.m, opt.m, sizeof(float) * pm->nparams) != 0) bad_shard = 2;
    if (tu_dev_cmp(ctx, o2.v, opt.v, sizeof(float) * pm->nparams) != 0) bad_shard = 3;
    bad_full = world_max(bad_full);
    bad_shard = world_max(bad_shard);
    vb_barrier(&g_world);
    if (g_world.rank == 0) tu_rm_rf(dir);
    vb_adam_free(&o1), vb_adam_free(&o2), vb_adam_free(&opt);
    vit_destroy(one2), vit_destroy(pm2);
    vb_free(mfull), vb_free(vfull);
    if (bad_full != 0) fail_msg("tp %d cp %d: single-rank load of the checkpoint differs (check %g)", L->tp, L->cp, bad_full);
    if (bad_shard != 0) fail_msg("tp %d cp %d: shard load of the checkpoint differs (check %g)", L->tp, L->cp, bad_shard);
}

static void check_layout(int tp, int cp) {
    if (g_world.size != tp * cp) {
        if (g_world.rank == 0) print_message("tp %d x cp %d needs %d ranks, world has %d\n", tp, cp, tp * cp, g_world.size);
        skip();
    }
    layout L;
    make_layout(&L, tp, cp);

    /* the reference: one rank, full model */
    vb_ctx *ctx = tu_ctx();
    vit_model *one = vit_create(&DIMS, NULL, MAXB, ctx, NULL);
    vit_model *pm = vit_create(&DIMS, &L.par, MAXB, ctx, NULL);
    vit_init_weights(one, 77);
    vit_init_weights(pm, 77);
    float *want = vb_malloc(sizeof(float) * pm->nparams), *got = vb_malloc(sizeof(float) * pm->nparams);
    float *one_h = vb_malloc(sizeof(float) * one->nparams);
    tu_get_params(one, one_h);
    tu_get_params(pm, got);
    expected_buffer(pm, one, one_h, want);
    const double init_bad = world_max(memcmp(want, got, sizeof(float) * pm->nparams) != 0);
    /* move away from the init, identically: the shards are slices of the full weights */
    tu_randomize_params(one, 78);
    tu_get_params(one, one_h);
    expected_buffer(pm, one, one_h, got);
    tu_set_params(pm, got);

    float *inp_h = vb_malloc(sizeof(float) * in_numel()), *tar_h = vb_malloc(sizeof(float) * out_numel());
    tu_fill_uniform(inp_h, in_numel(), -1, 1, 79);
    tu_fill_uniform(tar_h, out_numel(), -1, 1, 80);
    float *inp = tu_upload(ctx, inp_h, in_numel()), *tar = tu_upload(ctx, tar_h, out_numel());

    vit_forward(one, inp, tar, B);
    const float l1 = tu_get_loss(one);
    float *pred1 = vb_malloc(sizeof(float) * out_numel()), *predp = vb_malloc(sizeof(float) * out_numel());
    tu_get_pred(one, pred1, B);
    vit_forward(pm, inp, tar, B);
    const float lp = tu_get_loss(pm);
    tu_get_pred(pm, predp, B);
    const double loss_err = world_max(fabs((double)lp - l1) / fabs((double)l1));
    /* relative to the largest |pred|: elementwise ratios blow up near zero crossings */
    double pscale = 0, pdiff = 0;
    for (size_t i = 0; i < out_numel(); i++) {
        pscale = fmax(pscale, fabs(pred1[i]));
        pdiff = fmax(pdiff, fabs(predp[i] - pred1[i]));
    }
    const double pred_err = world_max(pdiff / pscale);
    vb_free(pred1), vb_free(predp);

    vit_backward(one);
    g_ready_calls = 0;
    pm->grad_ready = count_ready;
    vit_backward(pm);
    const int ready_calls = g_ready_calls;
    /* weights are replicated over cp: their gradients are partial sums (the DDP engine's job) */
    float *pg = vb_malloc(sizeof(float) * pm->nparams), *one_g = one_h;
    tu_get_grads(pm, pg);
    tu_get_grads(one, one_g);
    if (cp > 1) vb_allreduce_sum_f32(&L.cpc, pg, pm->nparams);

    expected_buffer(pm, one, one_g, want);
    double gmax = 0;
    for (size_t i = 0; i < one->nparams; i++) gmax = fmax(gmax, fabs(one_g[i]));
    char worst_name[VIT_MAX_NAME] = "";
    /* floor: attn.k.bias's true gradient is 0 (softmax shift invariance), only noise */
    const double grad_err = worst_tensor_err(pm, pg, want, 1e-3 * gmax, worst_name, sizeof worst_name);
    const double grad_err_all = world_max(grad_err);

    /* replicated over tp: the gradient must be the same on every tp rank */
    double repl_diff = 0;
    if (tp > 1) {
        float *g0 = vb_malloc(sizeof(float) * pm->nparams);
        memcpy(g0, pg, sizeof(float) * pm->nparams);
        vb_broadcast(&L.tpc, g0, sizeof(float) * pm->nparams, 0);
        for (int i = 0; i < pm->ntensors; i++) {
            const vit_tensor *t = &pm->tensors[i];
            if (t->shard_dim >= 0) continue;
            for (size_t j = 0; j < t->numel; j++)
                repl_diff = fmax(repl_diff, fabs(pg[t->offset + j] - g0[t->offset + j]));
        }
        vb_free(g0);
    }
    vb_free(pg);
    repl_diff = world_max(repl_diff / gmax);

    print_message("rank %d tp %d/%d cp %d/%d: loss %.7f vs %.7f (rel %.2g), pred rel %.2g, "
                  "worst grad rel %.2g (%s), tp-replicated grad diff %.2g\n",
                  g_world.rank, L.tp_rank, tp, L.cp_rank, cp, (double)lp, (double)l1, loss_err, pred_err,
                  grad_err, worst_name, repl_diff);
    const double ready_bad = world_max(ready_calls != pm->ntensors);

    if (init_bad == 0) check_checkpoint(&L, one, pm);

    vb_free(want), vb_free(got), vb_free(one_h), vb_free(inp_h), vb_free(tar_h);
    ctx->ops->free(ctx, inp), ctx->ops->free(ctx, tar);
    vit_destroy(one), vit_destroy(pm);
    free_layout(&L);

    assert_true(init_bad == 0);
    assert_true(ready_bad == 0);
    assert_true(l1 > 0.1f); /* a real loss, not a degenerate ~0 */
    assert_true(loss_err < 1e-5);
    assert_true(pscale > 0.1); /* the output is not trivially ~0 */
    assert_true(pred_err < 1e-5);
    assert_true(grad_err_all < 1e-4);
    assert_true(repl_diff < 1e-6);
}

static void test_single(void **state) { (void)state; check_layout(1, 1); }
static void test_tp2(void **state) { (void)state; check_layout(2, 1); }
static void test_cp2(void **state) { (void)state; check_layout(1, 2); }
static void test_cp3(void **state) { (void)state; check_layout(1, 3); }
static void test_tp2_cp2(void **state) { (void)state; check_layout(2, 2); }
static void test_tp4(void **state) { (void)state; check_layout(4, 1); }
static void test_cp4(void **state) { (void)state; check_layout(1, 4); }

int main(int argc, char **argv) {
    vb_world_init(&argc, &argv, &g_world);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single), cmocka_unit_test(test_tp2),    cmocka_unit_test(test_cp2),
        cmocka_unit_test(test_cp3),    cmocka_unit_test(test_tp2_cp2), cmocka_unit_test(test_tp4),
        cmocka_unit_test(test_cp4),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    vb_world_finalize();
    return rc;
}
