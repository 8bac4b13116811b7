/* test_memcheck.c: the memory a run needs, estimated before it is taken
 * (core/run/memcheck.h, vit_footprint_of). */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/run/memcheck.h"
#include "core/util/common.h"
#include "core/config/config.h"
#include "core/model/vit.h"
#include "kernels/ops.h"

static const vit_dims DIMS = {.img_h = 16, .img_w = 32, .patch = 4, .cin = 3, .cout = 2,
                              .dim = 24, .depth = 3, .heads = 4, .ln_eps = 1e-6f};

/* The footprint is exactly what vit_create allocates, for every layout. */
static void test_footprint_matches_create(void **state) {
    (void)state;
    const struct {
        int tp, tp_rank, cp, cp_rank, batch;
    } cases[] = {{1, 0, 1, 0, 1}, {1, 0, 1, 0, 5}, {2, 1, 1, 0, 3}, {1, 0, 3, 2, 2}, {2, 0, 2, 1, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vit_parallel par = {.tp_size = cases[i].tp, .tp_rank = cases[i].tp_rank, .cp_size = cases[i].cp,
                            .cp_rank = cases[i].cp_rank};
        vit_footprint f = vit_footprint_of(&DIMS, &par, cases[i].batch, tu_ctx());
        vit_model *m = vit_create(&DIMS, &par, cases[i].batch, tu_ctx(), NULL);
        if (f.nparams != m->nparams || f.act_bytes != m->act_bytes || f.param_act_bytes != 0)
            fail_msg("case %zu: footprint %zu params, %zu activation bytes, %zu param copy bytes; vit_create %zu, %zu",
                     i, f.nparams, f.act_bytes, f.param_act_bytes, m->nparams, m->act_bytes);
        vit_destroy(m);
    }
    /* a model far too deep to build is still sized, without building its table of layers' views */
    vit_dims deep = DIMS;
    deep.depth = 1000000;
    vit_footprint f = vit_footprint_of(&deep, NULL, 1, tu_ctx());
    vit_footprint f1 = vit_footprint_of(&DIMS, NULL, 1, tu_ctx());
    assert_true(f.nparams > 300000 * f1.nparams / 1000);
}

/* No activation grows with N^2: the attention keeps a log-sum-exp per query,
 * not the probabilities. Doubling the tokens (img_w 32 -> 64) at most doubles
 * the activations plus the attention workspace, which the backend sizes per
 * thread and per tile, not per token pair. */
static void test_activations_linear_in_tokens(void **state) {
    (void)state;
    vit_dims wide = DIMS;
    wide.img_w = 2 * DIMS.img_w;
    vit_footprint f = vit_footprint_of(&DIMS, NULL, 4, tu_ctx()), f2 = vit_footprint_of(&wide, NULL, 4, tu_ctx());
    const vb_ops *ops = tu_ctx()->ops;
    const int N = (DIMS.img_h / DIMS.patch) * (DIMS.img_w / DIMS.patch);
    const size_t ws = ops->attention_workspace_bytes(tu_ctx(), 4, N, N, DIMS.heads, DIMS.dim / DIMS.heads);
    const size_t ws2 = ops->attention_workspace_bytes(tu_ctx(), 4, 2 * N, 2 * N, DIMS.heads, DIMS.dim / DIMS.heads);
    if (!(f2.act_bytes - ws2 <= 2 * (f.act_bytes - ws) + 4096))
        fail_msg("activations %zu -> %zu bytes (workspace %zu -> %zu) for twice the tokens", f.act_bytes, f2.act_bytes,
                 ws, ws2);
}

static vb_config tiny_config(void) {
    vb_config c;
    vb_config_defaults(&c);
    c.img_size[0] = DIMS.img_h;
    c.img_size[1] = DIMS.img_w;
    c.n_in_channels = DIMS.cin;
    c.n_out_channels = DIMS.cout;
    return c;
}

typedef struct {
    vb_mem_estimate e;
    double limit;
    int node_ranks;
} check_args;

static void check_child(void *ctx) {
    check_args *a = ctx;
    vb_mem_check(&a->e, a->node_ranks, a->limit, "MemAvailable");
}

/* Over the limit: exit 2, one line with the estimate, the limit and the
 * largest batch that fits, and that batch really fits while one more does not. */
static void test_check_names_the_batch_that_fits(void **state) {
    (void)state;
    vb_config c = tiny_config();
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    vb_mem_estimate e;
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 64, 100, 1, tu_ctx(), &e);
    assert_true(e.total > e.params + e.grads + e.optimizer + e.activations);
    assert_true(e.device == 0); /* the CPU's buffers are host memory */
    vb_mem_estimate e10, e11;
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 10, 100, 1, tu_ctx(), &e10);
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 11, 100, 1, tu_ctx(), &e11);
    /* a limit between the estimates of batch 10 and 11 */
    check_args a = {e, 0.5 * (e10.total + e11.total), 1};
    tu_expect_exit(2, "the largest local batch that fits is 10 (--local_batch_size 10)", check_child, &a);
    tu_expect_exit(2, "more than the", check_child, &a);
    /* under the limit: nothing happens */
    vb_mem_check(&e10, 1, a.limit, "MemAvailable");
    /* two ranks on the node share the limit */
    check_args two = {e10, 1.5 * e10.total, 2};
    tu_expect_exit(2, "x 2 ranks on this node", check_child, &two);
    /* a limit below the parameters alone: no batch fits, and it says so */
    check_args none = {e, e.params, 1};
    tu_expect_exit(2, "no batch fits", check_child, &none);
    /* unknown limit (0): no check */
    vb_mem_check(&e, 1, 0, "unknown");
}

/* the tutorial's full model (base): 4050 tokens, embed_dim 384, depth 12 */
static const vit_dims BASE = {.img_h = 360, .img_w = 720, .patch = 8, .cin = 20, .cout = 20,
                              .dim = 384, .depth = 12, .heads = 8, .ln_eps = 1e-6f};

static void base_child(void *ctx) {
    (void)ctx;
    /* batch 64 against a 24 GiB machine */
    vb_config c;
    vb_config_defaults(&c);
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    vb_mem_estimate e;
    vb_mem_estimate_run(&c, &b, true, false, &BASE, NULL, 64, 100, 1, tu_ctx(), &e);
    vb_mem_check(&e, 1, 24.0 * 1024 * 1024 * 1024, "MemAvailable");
}

/* The tutorial's base config at batch 64 needs ~70 GiB of activations:
 * refused with the batch that fits, not OOM-killed. At batch 1 it fits in
 * under 4 GiB, the attention's probabilities (4050^2 per head) not being kept. */
static void test_base_config(void **state) {
    (void)state;
    tu_expect_exit(2, "the largest local batch that fits is", base_child, NULL);
    vb_config c;
    vb_config_defaults(&c);
    c.img_size[0] = BASE.img_h, c.img_size[1] = BASE.img_w;
    c.n_in_channels = BASE.cin, c.n_out_channels = BASE.cout;
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    vb_mem_estimate e;
    vb_mem_estimate_run(&c, &b, true, false, &BASE, NULL, 1, 100, 1, tu_ctx(), &e);
    print_message("base, batch 1: %.2f GiB (activations %.2f GiB)\n", e.total / 1073741824.0,
                  e.activations / 1073741824.0);
    assert_true(e.total < 4.0 * 1024 * 1024 * 1024);
    vb_mem_check(&e, 1, 24.0 * 1024 * 1024 * 1024, "MemAvailable");
}

/* A backend whose buffers are device memory (ops->host_memory 0): the
 * model's bytes are reported as device memory and not counted against the
 * host, so a host limit that holds the loader's buffers but not the model
 * passes; the host part alone still has to fit. */
typedef struct {
    vb_mem_estimate e;
    double limit;
} device_args;

static void device_child(void *p) {
    device_args *a = p;
    vb_mem_check(&a->e, 1, a->limit, "MemAvailable");
}

static void test_device_memory_not_counted_on_host(void **state) {
    (void)state;
    vb_ops device_ops = *vb_ops_cpu();
    device_ops.host_memory = 0;
    vb_ctx device_ctx = *tu_ctx();
    device_ctx.ops = &device_ops;
    vb_config c = tiny_config();
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    vb_mem_estimate host, dev;
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 8, 100, 1, tu_ctx(), &host);
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 8, 100, 1, &device_ctx, &dev);
    const double model = host.params + host.grads + host.optimizer + host.activations;
    assert_true(dev.device >= model);
    assert_true(fabs(dev.total - (dev.data + dev.records)) <= 1e-6 * dev.total);
    assert_true(dev.total < host.total - model + 1.0); /* no model bytes on the host */
    device_args a = {dev, dev.total + 0.5 * model};
    assert_true(a.limit < host.total); /* would refuse the same run on the CPU */
    vb_mem_check(&a.e, 1, a.limit, "MemAvailable");
    a.limit = 0.5 * dev.total;
    tu_expect_exit(2, "of host memory", device_child, &a);
}

/* benchy's records count: two billion trials are refused up front, not an
 * allocation failure later. */
static void test_records_of_huge_trials(void **state) {
    (void)state;
    vb_config c = tiny_config();
    vb_benchy_config b;
    vb_benchy_defaults(&b);
    b.trial[VB_TRIAL_FULL].ntrials = 2000000000;
    vb_mem_estimate e;
    vb_mem_estimate_run(&c, &b, true, false, &DIMS, NULL, 8, 50, 2, tu_ctx(), &e);
    assert_true(e.records > 1e12);
    /* and the limit this machine reports is positive */
    char src[32];
    assert_true(vb_mem_available(src, sizeof src) > 0);
    assert_true(strcmp(src, "MemAvailable") == 0 || strcmp(src, "cgroup memory.max") == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_footprint_matches_create),
        cmocka_unit_test(test_check_names_the_batch_that_fits),
        cmocka_unit_test(test_records_of_huge_trials),
        cmocka_unit_test(test_activations_linear_in_tokens),
        cmocka_unit_test(test_device_memory_not_counted_on_host),
        cmocka_unit_test(test_base_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
