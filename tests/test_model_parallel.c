/* test_model_parallel.c: the sharding arithmetic of tensor / context
 * parallelism in one process, no collectives: the cp token split, the tp
 * tensor table (local shapes, shard dims and offsets), init shards equal to
 * slices of the single-rank init, per-rank FLOP shares, checkpoint shards read
 * by hyperslab, and the layouts the model must refuse.
 *
 * Models with tp/cp > 1 are built without communicators here: that is enough
 * to inspect their shards (forward would need them, tested below to exit 1).
 * The numerics of the parallel forward/backward are tested under mpirun by
 * test_mpi_model (tests/test_model_mpi.sh).
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/checkpoint.h"
#include "core/comm/comm.h"
#include "core/util/common.h"
#include "core/model/vit.h"

/* N = (8/4)*(16/4) = 8 tokens, D 16, 2 heads, hidden 64 */
static const vit_dims TINY = {.img_h = 8, .img_w = 16, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 16, .depth = 2, .heads = 2, .ln_eps = 1e-6f};

static vit_model *make(int tp, int tp_rank, int cp, int cp_rank) {
    vit_parallel par = {.tp_size = tp, .tp_rank = tp_rank, .cp_size = cp, .cp_rank = cp_rank};
    return vit_create(&TINY, &par, 2, tu_ctx(), NULL);
}

/* ---------------------------------------------------------------------------
 * token split */

static void check_split(int ntok, int cp, const int *want) {
    int counts[16], offsets[16];
    vit_token_split(ntok, cp, counts, offsets);
    int off = 0;
    for (int r = 0; r < cp; r++) {
        if (counts[r] != want[r]) fail_msg("split %d/%d: rank %d gets %d, want %d", ntok, cp, r, counts[r], want[r]);
        assert_int_equal(offsets[r], off);
        off += counts[r];
    }
    assert_int_equal(off, ntok);
}

typedef struct { int ntok, cp; } split_args;
static void split_child(void *p) {
    split_args *a = p;
    int counts[16], offsets[16];
    vit_token_split(a->ntok, a->cp, counts, offsets);
}

static void test_token_split(void **state) {
    (void)state;
    check_split(4050, 4, (const int[]){1013, 1013, 1013, 1011});
    check_split(128, 3, (const int[]){43, 43, 42});
    check_split(8, 1, (const int[]){8});
    check_split(8, 2, (const int[]){4, 4});
    check_split(7, 7, (const int[]){1, 1, 1, 1, 1, 1, 1});
    /* div-up would leave the last rank empty (2,2,2,0): the tutorial falls back to floor */
    check_split(6, 4, (const int[]){1, 1, 1, 3});
    /* div-up would make it negative (2,2,2,-1) */
    check_split(5, 4, (const int[]){1, 1, 1, 2});
    /* the tutorial's 721 latitude rows over 4: 181 181 181 178 */
    check_split(721, 4, (const int[]){181, 181, 181, 178});

    split_args bad = {3, 4}; /* a rank without tokens */
    tu_expect_exit(2, "context_parallel 4", split_child, &bad);
    bad = (split_args){8, 0};
    tu_expect_exit(2, "context_parallel", split_child, &bad);
}

/* ---------------------------------------------------------------------------
 * tensor table */

typedef struct { const char *suffix; int dim; } shard_rule;
/* column-parallel: output rows (dim 0); row-parallel: input columns (dim 1) */
static const shard_rule RULES[] = {
    {"attn.q.weight", 0}, {"attn.q.bias", 0}, {"attn.k.weight", 0}, {"attn.k.bias", 0},
    {"attn.v.weight", 0}, {"attn.v.bias", 0}, {"attn.proj.weight", 1}, {"mlp.fc1.weight", 0},
    {"mlp.fc1.bias", 0},  {"mlp.fc2.weight", 1},
};

static int expected_shard_dim(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++) {
        size_t k = strlen(RULES[i].suffix);
        if (n >= k && strcmp(name + n - k, RULES[i].suffix) == 0) return RULES[i].dim;
    }
    return -1;
}

static void test_tensor_table_tp2(void **state) {
    (void)state;
    vit_model *one = make(1, 0, 1, 0);
    for (int i = 0; i < one->ntensors; i++) {
        const vit_tensor *t = &one->tensors[i];
        assert_int_equal(t->shard_dim, -1); /* nothing sharded on one rank */
        assert_int_equal(t->full_offset, t->offset);
        assert_int_equal(t->full_numel, t->numel);
        for (int k = 0; k < t->ndim; k++) assert_int_equal(t->full_shape[k], t->shape[k]);
    }
    assert_int_equal(one->nparams_full, one->nparams);

    size_t sharded_total = 0;
    for (int r = 0; r < 2; r++) {
        vit_model *m = make(2, r, 1, 0);
        assert_int_equal(m->ntensors, one->ntensors);
        assert_int_equal(m->dim_local, 8);
        assert_int_equal(m->heads_local, 1);
        assert_int_equal(m->hidden_local, 32);
        assert_int_equal(m->ntok_local, 8);
        assert_int_equal(m->nparams_full, one->nparams);
        size_t off = 0;
        for (int i = 0; i < m->ntensors; i++) {
            const vit_tensor *t = &m->tensors[i], *f = &one->tensors[i];
            assert_string_equal(t->name, f->name);
            assert_int_equal(t->ndim, f->ndim);
            assert_int_equal(t->offset, off);
            assert_int_equal(t->full_offset, f->offset);
            assert_int_equal(t->full_numel, f->numel);
            assert_int_equal(t->init, f->init);
            const int sd = expected_shard_dim(t->name);
            if (t->shard_dim != sd) fail_msg("%s: shard_dim %d, want %d", t->name, t->shard_dim, sd);
            size_t numel = 1;
            for (int k = 0; k < t->ndim; k++) {
                assert_int_equal(t->full_shape[k], f->shape[k]);
                const int want = k == sd ? f->shape[k] / 2 : f->shape[k];
                if (t->shape[k] != want) fail_msg("%s: local shape[%d] %d, want %d", t->name, k, t->shape[k], want);
                numel *= (size_t)t->shape[k];
            }
            if (sd >= 0) {
                assert_int_equal(t->shard_len, f->shape[sd] / 2);
                assert_int_equal(t->shard_offset, r * f->shape[sd] / 2);
                sharded_total += t->numel;
            } else {
                assert_int_equal(t->shard_len, 0);
                assert_int_equal(t->shard_offset, 0);
            }
            assert_int_equal(t->numel, numel);
            off += numel;
        }
        assert_int_equal(m->nparams, off);
        /* the views follow the local offsets */
        int q = vit_find_tensor(m, "blocks.1.attn.q.weight"), fc2 = vit_find_tensor(m, "blocks.0.mlp.fc2.weight");
        assert_ptr_equal(m->p.blocks[1].q_w, vb_act_at(m->ctx, m->params_act, m->tensors[q].offset));
        assert_ptr_equal(m->g.blocks[0].fc2_w, m->grads + m->tensors[fc2].offset);
        assert_ptr_equal(m->p.head_w, vb_act_at(m->ctx, m->params_act, m->tensors[m->ntensors - 1].offset));
        /* spot values: fc1.weight [64,16] -> [32,16] rows 32r..; fc2.weight [16,64] -> [16,32] cols 32r.. */
        int fc1 = vit_find_tensor(m, "blocks.0.mlp.fc1.weight");
        assert_int_equal(m->tensors[fc1].shape[0], 32);
        assert_int_equal(m->tensors[fc1].shape[1], 16);
        assert_int_equal(m->tensors[fc2].shape[0], 16);
        assert_int_equal(m->tensors[fc2].shape[1], 32);
        assert_int_equal(m->tensors[fc2].shard_offset, 32 * r);
        vit_destroy(m);
    }
    /* the two ranks' shards of the sharded tensors add up to the full tensors */
    size_t full_sharded = 0;
    for (int i = 0; i < one->ntensors; i++)
        if (expected_shard_dim(one->tensors[i].name) >= 0) full_sharded += one->tensors[i].numel;
    assert_int_equal(sharded_total, full_sharded);

    /* cp replicates every tensor: same table as one rank */
    vit_model *c = make(1, 0, 3, 2);
    assert_int_equal(c->nparams, one->nparams);
    assert_int_equal(c->ntok_local, 2); /* 8 over 3: 3 3 2 */
    assert_int_equal(c->tok_offset, 6);
    for (int i = 0; i < c->ntensors; i++) assert_int_equal(c->tensors[i].shard_dim, -1);
    vit_destroy(c);
    vit_destroy(one);
}

/* ---------------------------------------------------------------------------
 * init */

static void test_init_shards_are_slices(void **state) {
    (void)state;
    vit_model *one = make(1, 0, 1, 0);
    vit_init_weights(one, 1234);
    float *one_p = tu_download(one->ctx, one->params, one->nparams);
    const int layouts[][4] = {{2, 0, 1, 0}, {2, 1, 1, 0}, {2, 1, 2, 1}, {1, 0, 3, 1}};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        const int *L = layouts[li];
        vit_model *m = make(L[0], L[1], L[2], L[3]);
        vit_init_weights(m, 1234);
        float *want = vb_malloc(sizeof(float) * m->nparams), *got = tu_download(m->ctx, m->params, m->nparams);
        for (int i = 0; i < m->ntensors; i++)
            tu_expected_shard(&m->tensors[i], one_p + one->tensors[i].offset, want + m->tensors[i].offset);
        if (memcmp(want, got, sizeof(float) * m->nparams) != 0)
            fail_msg("tp %d rank %d cp %d rank %d: init shards differ from the single-rank slices", L[0], L[1],
                     L[2], L[3]);
        /* and it is not trivially so: rank 1's q shard differs from rank 0's rows */
        if (L[0] == 2 && L[1] == 1) {
            int q = vit_find_tensor(m, "blocks.0.attn.q.weight");
            assert_memory_not_equal(got + m->tensors[q].offset, one_p + one->tensors[q].offset,
                                    sizeof(float) * m->tensors[q].numel);
        }
        vb_free(want), vb_free(got);
        vit_destroy(m);
    }
    vb_free(one_p);
    vit_destroy(one);
}

/* vit_shard_extract / vit_shard_insert round trip: two tp shards rebuild the tensor */
static void test_shard_copies(void **state) {
    (void)state;
    vit_model *one = make(1, 0, 1, 0);
    vit_init_weights(one, 5);
    vit_model *r0 = make(2, 0, 1, 0), *r1 = make(2, 1, 1, 0);
    float *one_p = tu_download(one->ctx, one->params, one->nparams);
    for (int i = 0; i < one->ntensors; i++) {
        const vit_tensor *t0 = &r0->tensors[i], *t1 = &r1->tensors[i];
        const float *full = one_p + one->tensors[i].offset;
        float *s = vb_malloc(sizeof(float) * t1->numel), *want = vb_malloc(sizeof(float) * t1->numel);
        float *back = vb_malloc(sizeof(float) * t1->full_numel);
        vit_shard_extract(t1, t1->shard_offset, full, s);
        tu_expected_shard(t1, full, want);
        assert_memory_equal(s, want, sizeof(float) * t1->numel);
        /* rank 0's shard inserted at rank 0's offset, rank 1's at rank 1's */
        vit_shard_insert(t1, t1->shard_offset, s, back);
        vit_shard_extract(t0, t0->shard_offset, full, s);
        vit_shard_insert(t0, t0->shard_offset, s, back);
        assert_memory_equal(back, full, sizeof(float) * t1->full_numel);
        vb_free(s), vb_free(want), vb_free(back);
    }
    vb_free(one_p);
    vit_destroy(r0), vit_destroy(r1), vit_destroy(one);
}

/* ---------------------------------------------------------------------------
 * FLOPs */

static void test_flops_shares(void **state) {
    (void)state;
    vit_model *one = make(1, 0, 1, 0);
    const double total = vit_train_flops(one, 2);
    assert_true(fabs(total - 761856.0) < 0.5); /* test_model's hand count */
    const int tps[] = {1, 2}, cps[] = {1, 2, 3};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++) {
            double sum = 0;
            for (int tr = 0; tr < tps[a]; tr++)
                for (int cr = 0; cr < cps[b]; cr++) {
                    vit_model *m = make(tps[a], tr, cps[b], cr);
                    double f = vit_train_flops(m, 2);
                    assert_true(f > 0 && (f < total || (tps[a] == 1 && cps[b] == 1)));
                    sum += f;
                    vit_destroy(m);
                }
            if (fabs(sum - total) > 1e-9 * total)
                fail_msg("tp %d cp %d: ranks' FLOPs sum to %.1f, one rank %.1f", tps[a], cps[b], sum, total);
        }
    /* the shares follow the token split: cp 3 ranks hold 3, 3, 2 of 8 tokens;
     * attention's N keys per query keep it linear in the local tokens */
    vit_model *c0 = make(1, 0, 3, 0), *c2 = make(1, 0, 3, 2);
    assert_true(fabs(vit_train_flops(c0, 2) / vit_train_flops(c2, 2) - 1.5) < 1e-12);
    vit_destroy(c0), vit_destroy(c2);
    vit_destroy(one);
}

/* ---------------------------------------------------------------------------
 * checkpoints: a single-rank file read back as tp shards (hyperslabs) */

static void test_checkpoint_load_shards(void **state) {
    (void)state;
    char dir[256], path[320];
    tu_tmpdir(dir, sizeof dir, "mpar");
    snprintf(path, sizeof path, "%s/ckpt.h5", dir);
    vit_model *one = make(1, 0, 1, 0);
    vit_init_weights(one, 9);
    /* every element distinct; host copies of what the file will hold */
    const size_t n = one->nparams;
    float *srcs[3] = {vb_malloc(sizeof(float) * n), vb_malloc(sizeof(float) * n), vb_malloc(sizeof(float) * n)};
    tu_fill_uniform(srcs[0], n, -1, 1, 10);
    tu_fill_uniform(srcs[1], n, -1, 1, 11);
    tu_fill_uniform(srcs[2], n, 0, 1, 12);
    tu_set_params(one, srcs[0]);
    vb_adam opt;
    vb_adam_init(&opt, n, tu_ctx());
    tu_h2d(tu_ctx(), opt.m, srcs[1], sizeof(float) * n);
    tu_h2d(tu_ctx(), opt.v, srcs[2], sizeof(float) * n);
    opt.step = 7;
    vb_checkpoint_save(path, one, &opt);

    for (int r = 0; r < 2; r++) {
        vit_model *m = make(2, r, 1, 0);
        vb_adam o;
        vb_adam_init(&o, m->nparams, tu_ctx());
        vb_checkpoint_load(path, m, &o);
        assert_int_equal(o.step, 7);
        float *want = vb_malloc(sizeof(float) * m->nparams);
        const float *gots_dev[3] = {m->params, o.m, o.v};
        for (int s = 0; s < 3; s++) {
            float *got = tu_download(tu_ctx(), gots_dev[s], m->nparams);
            for (int i = 0; i < m->ntensors; i++)
                tu_expected_shard(&m->tensors[i], srcs[s] + one->tensors[i].offset, want + m->tensors[i].offset);
            if (memcmp(want, got, sizeof(float) * m->nparams) != 0)
                fail_msg("tp rank %d: loaded %s differs from the file's slices", r,
                         s == 0 ? "params" : s == 1 ? "exp_avg" : "exp_avg_sq");
            vb_free(got);
        }
        vb_free(want);
        vb_adam_free(&o);
        vit_destroy(m);
    }
    for (int s = 0; s < 3; s++) vb_free(srcs[s]);
    vb_adam_free(&opt);
    vit_destroy(one);
    tu_rm_rf(dir);
}

/* ---------------------------------------------------------------------------
 * layouts the model refuses */

typedef struct { vit_dims d; vit_parallel par; } create_args;
static void create_child(void *p) {
    create_args *a = p;
    vit_create(&a->d, &a->par, 1, tu_ctx(), NULL);
}

static void forward_child(void *p) {
    vit_model *m = p;
    float inp[1] = {0};
    vit_forward(m, inp, NULL, 1); /* dies before touching inp */
}

static void test_bad_layouts(void **state) {
    (void)state;
    create_args a = {.d = TINY, .par = {.tp_size = 4, .tp_rank = 0, .cp_size = 1, .cp_rank = 0}};
    tu_expect_exit(2, "num_heads 2 is not divisible by tensor_parallel 4", create_child, &a);
    a.d.heads = 4, a.par.tp_size = 3; /* D 16 / 4 heads fine, 4 heads over 3 not */
    tu_expect_exit(2, "num_heads 4 is not divisible by tensor_parallel 3", create_child, &a);
    a = (create_args){.d = TINY, .par = {.tp_size = 1, .tp_rank = 0, .cp_size = 9, .cp_rank = 0}};
    tu_expect_exit(2, "context_parallel 9", create_child, &a);
    a.par.cp_size = -1;
    tu_expect_exit(2, "context_parallel", create_child, &a);
    /* a communicator that disagrees with the layout is a programming error */
    vb_comm fake = {.rank = 0, .size = 3, .handle = NULL, .prof = NULL};
    a = (create_args){.d = TINY, .par = {.tp_size = 2, .tp_rank = 0, .cp_size = 1, .cp_rank = 0, .tp = &fake}};
    tu_expect_exit(1, "tp communicator", create_child, &a);
    /* tp 2 without a communicator: fine to inspect, not to run */
    vit_model *m = make(2, 0, 1, 0);
    tu_expect_exit(1, "no tp communicator", forward_child, m);
    vit_destroy(m);
    m = make(1, 0, 2, 1);
    tu_expect_exit(1, "no cp communicator", forward_child, m);
    vit_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_split),
        cmocka_unit_test(test_tensor_table_tp2),
        cmocka_unit_test(test_init_shards_are_slices),
        cmocka_unit_test(test_shard_copies),
        cmocka_unit_test(test_flops_shares),
        cmocka_unit_test(test_checkpoint_load_shards),
        cmocka_unit_test(test_bad_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
