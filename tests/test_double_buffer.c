/* test_double_buffer.c: the dali path's slot and event plans (core/data/double_buffer.h).
 *
 * The plans are carried out on a model of two in-order queues (compute and
 * copy) with events, where each op carries a vector clock: op A happens
 * before op B when B's clock has seen A. The tests then check what the
 * trainer relies on: a step reads a slot only after the copy that filled it;
 * a copy overwrites a slot only after every earlier reader of it; the host
 * gives a batch back only after every copy that read it; and the copy of
 * batch i+1 does not wait for step i (it can overlap it).
 */
#include "tests/test_util.h"

#include <string.h>

#include "core/data/double_buffer.h"

enum { Q_COMPUTE = 0, Q_COPY = 1, NQ = 2, MAXOPS = 512 };

typedef struct {
    int q, index;     /* queue and 1-based position in it */
    int vc[NQ];       /* ops of each queue that happen before (or are) this one */
    int slot;         /* slot it writes (copy) or reads (step) */
    bool is_copy;
    const void *host; /* the host batch a copy reads */
} op;

typedef struct {
    int vc[NQ];       /* the queue position captured by the latest record */
    bool recorded;
} ev;

typedef struct {
    op ops[MAXOPS];
    int nops;
    int qclock[NQ][NQ]; /* each queue's current vector clock */
    int qlen[NQ];
    ev copied[2], freed[2];
    int host_seen[NQ];  /* what the host has waited for */
    vb_dbuf d;
} sim;

static void sim_init(sim *s) {
    memset(s, 0, sizeof *s);
    vb_dbuf_init(&s->d);
}

static op *enqueue(sim *s, int q, int slot, bool is_copy, const void *host) {
    assert_true(s->nops < MAXOPS);
    op *o = &s->ops[s->nops++];
    s->qlen[q]++;
    s->qclock[q][q] = s->qlen[q];
    o->q = q;
    o->index = s->qlen[q];
    memcpy(o->vc, s->qclock[q], sizeof o->vc);
    o->slot = slot;
    o->is_copy = is_copy;
    o->host = host;
    return o;
}

static void record(sim *s, int q, ev *e) {
    memcpy(e->vc, s->qclock[q], sizeof e->vc);
    e->recorded = true;
}

static void wait_ev(sim *s, int q, const ev *e) {
    assert_true(e->recorded);
    for (int k = 0; k < NQ; k++)
        if (e->vc[k] > s->qclock[q][k]) s->qclock[q][k] = e->vc[k];
}

static bool before(const op *a, const op *b) { return b->vc[a->q] >= a->index; }

/* the staging of core/run/staging.c (vb_staging_put) */
static void do_stage(sim *s, const void *host) {
    vb_dbuf_stage_plan p;
    assert_int_equal(vb_dbuf_stage(&s->d, host, &p), 0);
    if (p.record_free_now) record(s, Q_COMPUTE, &s->freed[p.slot]);
    if (p.wait_free) wait_ev(s, Q_COPY, &s->freed[p.slot]);
    enqueue(s, Q_COPY, p.slot, true, host);
    record(s, Q_COPY, &s->copied[p.slot]);
}

/* the step (or a validation forward) on the staged batch: returns its op */
static op *do_use(sim *s) {
    vb_dbuf_use_plan p;
    assert_int_equal(vb_dbuf_use(&s->d, &p), 0);
    if (p.record_free >= 0) record(s, Q_COMPUTE, &s->freed[p.record_free]);
    wait_ev(s, Q_COMPUTE, &s->copied[p.slot]);
    return enqueue(s, Q_COMPUTE, p.slot, false, NULL);
}

/* the host gives `host` back to the loader */
static void do_release(sim *s, const void *host) {
    int slot = vb_dbuf_host_release(&s->d, host);
    if (slot < 0) return;
    const ev *e = &s->copied[slot];
    for (int k = 0; k < NQ; k++)
        if (e->vc[k] > s->host_seen[k]) s->host_seen[k] = e->vc[k];
    /* every copy that read this batch has completed */
    for (int i = 0; i < s->nops; i++) {
        const op *o = &s->ops[i];
        if (o->is_copy && o->host == host && s->host_seen[o->q] < o->index)
            fail_msg("host batch %p released before its copy (op %d) completed", host, i);
    }
}

/* Every step reads the batch the latest earlier copy into its slot wrote,
 * after that copy; every copy follows every earlier reader of its slot. */
static void check_order(const sim *s) {
    for (int i = 0; i < s->nops; i++) {
        const op *o = &s->ops[i];
        for (int j = 0; j < i; j++) {
            const op *p = &s->ops[j];
            if (p->slot != o->slot) continue;
            if (o->is_copy && !p->is_copy && !before(p, o))
                fail_msg("copy (op %d) into slot %d may overwrite it while op %d still reads it", i, o->slot, j);
        }
        if (!o->is_copy) {
            int last_copy = -1;
            for (int j = 0; j < i; j++)
                if (s->ops[j].is_copy && s->ops[j].slot == o->slot) last_copy = j;
            assert_true(last_copy >= 0);
            if (!before(&s->ops[last_copy], o))
                fail_msg("step (op %d) may read slot %d before its copy (op %d) completed", i, o->slot, last_copy);
        }
    }
}

/* The FULL trial's order: the first batch is copied in the step, each later
 * one while the step before computes; host batch k goes back before k + 1
 * is fetched (the loader holds one). */
static void run_full(sim *s, int n, const void *const *hosts, op **steps) {
    do_stage(s, hosts[0]);
    for (int k = 0; k < n; k++) {
        steps[k] = do_use(s);
        do_release(s, hosts[k]);
        if (k + 1 < n) do_stage(s, hosts[k + 1]);
    }
}

static void test_full_trial(void **state) {
    (void)state;
    static sim s;
    sim_init(&s);
    enum { N = 9 };
    char hbuf[N];
    const void *hosts[N];
    for (int k = 0; k < N; k++) hosts[k] = &hbuf[k];
    op *steps[N];
    run_full(&s, N, hosts, steps);
    check_order(&s);
    /* slots alternate, and batch k + 1's copy is free to overlap step k */
    for (int k = 0; k < N; k++) assert_int_equal(steps[k]->slot, k % 2);
    for (int i = 0; i < s.nops; i++) {
        const op *c = &s.ops[i];
        if (!c->is_copy) continue;
        for (int k = 0; k < N; k++)
            if (c->host == hosts[k] && k > 0) assert_false(before(steps[k - 1], c));
    }
    /* a second trial (the loader reset between) continues the same way */
    op *steps2[N];
    run_full(&s, N, hosts, steps2);
    check_order(&s);
    assert_false(vb_dbuf_has_staged(&s.d));
}

/* SYNTHETIC: one host batch, copied again for every step, overlapped; the
 * untimed first step stages the copy for the first timed one. */
static void test_synthetic_trial(void **state) {
    (void)state;
    static sim s;
    sim_init(&s);
    char cached;
    do_stage(&s, &cached);
    op *first = do_use(&s);
    do_stage(&s, &cached);
    (void)first;
    enum { N = 7 };
    op *steps[N];
    for (int k = 0; k < N; k++) {
        steps[k] = do_use(&s);
        if (k + 1 < N) do_stage(&s, &cached);
    }
    check_order(&s);
    /* the copy for step k + 1 does not wait for step k */
    int copies = 0;
    for (int i = 0; i < s.nops; i++) {
        const op *c = &s.ops[i];
        if (!c->is_copy) continue;
        copies++;
        for (int k = 0; k + 1 < N; k++)
            if (i > (int)(steps[k] - s.ops) && i < (int)(steps[k + 1] - s.ops)) assert_false(before(steps[k], c));
    }
    assert_int_equal(copies, N + 1);
    do_release(&s, &cached);
    assert_int_equal(vb_dbuf_host_release(&s.d, &cached), -1); /* nothing left to wait for */
}

/* Validation after training: copy, forward, give back, one batch at a time,
 * over the same two slots; then training resumes. */
static void test_validation_between_trials(void **state) {
    (void)state;
    static sim s;
    sim_init(&s);
    enum { N = 4 };
    char hbuf[N];
    const void *hosts[N];
    for (int k = 0; k < N; k++) hosts[k] = &hbuf[k];
    op *steps[N];
    run_full(&s, N, hosts, steps);
    char vbuf[3];
    for (int i = 0; i < 3; i++) {
        do_stage(&s, &vbuf[i]);
        op *fwd = do_use(&s);
        enqueue(&s, Q_COMPUTE, fwd->slot, false, NULL); /* a second op reading the batch (the RMSE) */
        do_release(&s, &vbuf[i]);
    }
    run_full(&s, N, hosts, steps);
    check_order(&s);
}

static void test_refusals(void **state) {
    (void)state;
    vb_dbuf d;
    vb_dbuf_init(&d);
    vb_dbuf_use_plan u;
    vb_dbuf_stage_plan p;
    char a, b;
    assert_int_equal(vb_dbuf_use(&d, &u), -1); /* nothing staged */
    assert_false(vb_dbuf_has_staged(&d));
    assert_int_equal(vb_dbuf_stage(&d, &a, &p), 0);
    assert_int_equal(p.slot, 0);
    assert_false(p.wait_free); /* a fresh slot has no reader to wait for */
    assert_false(p.record_free_now);
    assert_true(vb_dbuf_has_staged(&d));
    assert_int_equal(vb_dbuf_stage(&d, &b, &p), -1); /* one ahead at most */
    assert_int_equal(vb_dbuf_use(&d, &u), 0);
    assert_int_equal(u.slot, 0);
    assert_int_equal(u.record_free, -1);
    assert_int_equal(vb_dbuf_host_release(&d, &b), -1); /* no copy reads b */
    assert_int_equal(vb_dbuf_host_release(&d, NULL), -1);
    assert_int_equal(vb_dbuf_host_release(&d, &a), 0);
    assert_int_equal(vb_dbuf_host_release(&d, &a), -1); /* waited once: done */
    assert_int_equal(vb_dbuf_stage(&d, &b, &p), 0);
    assert_int_equal(p.slot, 1);
    assert_int_equal(vb_dbuf_use(&d, &u), 0);
    assert_int_equal(u.record_free, 0); /* slot 0's reader is enqueued: free[0] now */
    assert_int_equal(vb_dbuf_stage(&d, &a, &p), 0);
    assert_int_equal(p.slot, 0);
    assert_true(p.wait_free);
    assert_false(p.record_free_now);
}

/* Two copies of the same host batch in flight: the host waits for the later. */
static void test_release_waits_latest_copy(void **state) {
    (void)state;
    vb_dbuf d;
    vb_dbuf_init(&d);
    vb_dbuf_use_plan u;
    vb_dbuf_stage_plan p;
    char a, b;
    assert_int_equal(vb_dbuf_stage(&d, &a, &p), 0);
    assert_int_equal(vb_dbuf_use(&d, &u), 0);
    assert_int_equal(vb_dbuf_stage(&d, &a, &p), 0);
    assert_int_equal(p.slot, 1);
    assert_int_equal(vb_dbuf_host_release(&d, &a), 1);
    assert_int_equal(vb_dbuf_host_release(&d, &a), -1);
    /* an older batch's copy is covered by waiting for a later copy */
    assert_int_equal(vb_dbuf_use(&d, &u), 0);
    assert_int_equal(vb_dbuf_stage(&d, &b, &p), 0);
    assert_int_equal(vb_dbuf_use(&d, &u), 0);
    assert_int_equal(vb_dbuf_stage(&d, &a, &p), 0);
    assert_int_equal(vb_dbuf_host_release(&d, &a), 1);
    assert_int_equal(vb_dbuf_host_release(&d, &b), -1); /* its copy came before: complete too */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_trial),
        cmocka_unit_test(test_synthetic_trial),
        cmocka_unit_test(test_validation_between_trials),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_release_waits_latest_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
