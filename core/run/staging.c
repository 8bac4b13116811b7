/* staging.c: batches from the loader to the step (staging.h). */
#include "core/run/staging.h"

#include "core/util/common.h"
#include "core/util/fileio.h" /* vb_die_env */

void vb_staging_init(vb_staging *s, const vb_ops *ops, vb_ctx *ctx, vb_profiler *prof, bool dali, bool tf32,
                     int local_batch, int in_channels, int out_channels, size_t hw, const float *mean,
                     const float *std) {
    *s = (vb_staging){.ops = ops, .ctx = ctx, .prof = prof, .dali = dali, .in_channels = in_channels,
                      .out_channels = out_channels, .hw = hw};
    const size_t inp_bytes = (size_t)local_batch * (size_t)in_channels * hw * sizeof(float);
    const size_t tar_bytes = (size_t)local_batch * (size_t)out_channels * hw * sizeof(float);
    /* pytorch: one device batch, copied on the compute context; dali: two,
     * copied on a context of their own while the previous step computes */
    const int nslots = dali ? 2 : 1;
    for (int i = 0; i < nslots; i++) {
        s->inp_slot[i] = ops->alloc(ctx, inp_bytes);
        s->tar_slot[i] = ops->alloc(ctx, tar_bytes);
    }
    s->inp_dev = s->inp_slot[0];
    s->tar_dev = s->tar_slot[0];
    s->batch_copied = ops->event_create(ctx);
    if (mean) {
        /* the loaders hand over the files' values; each batch is normalised
         * on the backend after its copy, with the stats both loaders read */
        const int nc = in_channels > out_channels ? in_channels : out_channels;
        const size_t bytes = (size_t)nc * sizeof(float);
        s->norm_mean = ops->alloc(ctx, bytes);
        s->norm_std = ops->alloc(ctx, bytes);
        ops->memcpy_h2d(ctx, s->norm_mean, mean, bytes);
        ops->memcpy_h2d(ctx, s->norm_std, std, bytes);
        ops->synchronize(ctx);
    }
    if (dali) {
        vb_ctx_opts o = {.act = ctx->act, .device = ctx->device, .tf32 = tf32 ? 1 : 0};
        char err[256] = "";
        s->copy_ctx = ops->ctx_create(&o, err, sizeof err);
        if (!s->copy_ctx)
            vb_die_env("data_loader_config dali: cannot create the copy context on device %d: %s", ctx->device,
                       err[0] ? err : "no reason given");
        for (int i = 0; i < 2; i++) {
            s->copied[i] = ops->event_create(ctx);
            s->freed[i] = ops->event_create(ctx);
        }
        vb_dbuf_init(&s->dbuf);
    }
}

/* normalize_on_device: the batch just copied into inp/tar normalised on ctx
 * (the copy's queue, so under dali it runs beside the step as the copy does) */
static void normalize_staged(vb_staging *s, vb_ctx *ctx, float *inp, float *tar, int B) {
    if (!s->norm_mean) return;
    const int id = VB_OP_ID(s->prof, "normalize", VB_CAT_COMPUTE);
    vb_prof_token tok = vb_prof_begin_on(s->prof, id, ctx);
    s->ops->normalize_channels(ctx, inp, s->norm_mean, s->norm_std, B, s->in_channels, s->hw);
    s->ops->normalize_channels(ctx, tar, s->norm_mean, s->norm_std, B, s->out_channels, s->hw);
    vb_prof_end_on(s->prof, tok, 0, ctx);
}

void vb_staging_put(vb_staging *s, const vb_batch *b) {
    const size_t inp = (size_t)b->B * (size_t)s->in_channels * s->hw * sizeof(float);
    const size_t tar = (size_t)b->B * (size_t)s->out_channels * s->hw * sizeof(float);
    const int h2d = VB_OP_ID(s->prof, "h2d", VB_CAT_MEMCPY);
    const vb_ops *ops = s->ops;
    if (!s->dali) {
        if (s->staged) vb_die_internal("staging: the batch staged before has not been used by a step");
        vb_prof_token tok = vb_prof_begin(s->prof, h2d);
        ops->memcpy_h2d(s->ctx, s->inp_slot[0], b->inp, inp);
        ops->memcpy_h2d(s->ctx, s->tar_slot[0], b->tar, tar);
        vb_prof_end(s->prof, tok, inp + tar);
        normalize_staged(s, s->ctx, s->inp_slot[0], s->tar_slot[0], b->B);
        /* the copies read the loader's buffer, which the caller releases (and a
         * worker refills) as soon as this returns: wait for them, not for the
         * work queued before them */
        ops->event_record(s->ctx, s->batch_copied);
        ops->event_synchronize(s->ctx, s->batch_copied);
        s->slot_B[0] = b->B;
        s->staged = true;
        return;
    }
    vb_dbuf_stage_plan p;
    if (vb_dbuf_stage(&s->dbuf, b, &p) != 0)
        vb_die_internal("staging: the batch staged before has not been used by a step");
    const int k = p.slot;
    if (p.record_free_now) ops->event_record(s->ctx, s->freed[k]);
    /* the step that last read this buffer must be done with it (device-side) */
    if (p.wait_free) ops->event_wait(s->copy_ctx, s->freed[k]);
    vb_prof_token tok = vb_prof_begin_on(s->prof, h2d, s->copy_ctx);
    ops->memcpy_h2d(s->copy_ctx, s->inp_slot[k], b->inp, inp);
    ops->memcpy_h2d(s->copy_ctx, s->tar_slot[k], b->tar, tar);
    vb_prof_end_on(s->prof, tok, inp + tar, s->copy_ctx);
    normalize_staged(s, s->copy_ctx, s->inp_slot[k], s->tar_slot[k], b->B);
    ops->event_record(s->copy_ctx, s->copied[k]);
    s->slot_B[k] = b->B;
}

void vb_staging_reuse(vb_staging *s) {
    if (s->dali) vb_die_internal("staging: a batch is reused without a copy under dali");
    if (s->staged) vb_die_internal("staging: the batch staged before has not been used by a step");
    if (s->slot_B[0] <= 0) vb_die_internal("staging: no batch was copied to reuse");
    s->staged = true;
}

bool vb_staging_has(const vb_staging *s) { return s->dali ? vb_dbuf_has_staged(&s->dbuf) : s->staged; }

int vb_staging_take(vb_staging *s) {
    if (!s->dali) {
        if (!s->staged) vb_die_internal("training step without a staged batch");
        s->staged = false;
        s->inp_dev = s->inp_slot[0];
        s->tar_dev = s->tar_slot[0];
        return s->slot_B[0];
    }
    vb_dbuf_use_plan u;
    if (vb_dbuf_use(&s->dbuf, &u) != 0) vb_die_internal("training step without a staged batch");
    /* everything that reads the other buffer is enqueued by now: the copy
     * that overwrites it next waits for this point */
    if (u.record_free >= 0) s->ops->event_record(s->ctx, s->freed[u.record_free]);
    /* the step waits for its batch's copy on the device; the host goes on */
    s->ops->event_wait(s->ctx, s->copied[u.slot]);
    s->inp_dev = s->inp_slot[u.slot];
    s->tar_dev = s->tar_slot[u.slot];
    return s->slot_B[u.slot];
}

/* dali: the host waits for the latest copy that reads b */
static void wait_host_copy(vb_staging *s, const vb_batch *b) {
    int k = vb_dbuf_host_release(&s->dbuf, b);
    if (k >= 0) s->ops->event_synchronize(s->copy_ctx, s->copied[k]);
}

void vb_staging_release(vb_staging *s, vb_loader *l, const vb_batch *b) {
    if (s->dali && b) wait_host_copy(s, b);
    vb_loader_release(l, b);
}

void vb_staging_copy(vb_staging *s, const vb_batch *b) {
    if (vb_staging_has(s)) vb_die_internal("staging: a staged batch has not been used by a step");
    vb_staging_put(s, b);
    (void)vb_staging_take(s);
    /* the caller releases b as soon as this returns */
    if (s->dali) wait_host_copy(s, b);
}

void vb_staging_synchronize(vb_staging *s) {
    if (s->copy_ctx) s->ops->synchronize(s->copy_ctx);
}

void vb_staging_free(vb_staging *s) {
    if (!s->ops) return;
    for (int i = 0; i < 2; i++) {
        if (s->inp_slot[i]) s->ops->free(s->ctx, s->inp_slot[i]);
        if (s->tar_slot[i]) s->ops->free(s->ctx, s->tar_slot[i]);
        if (s->copied[i]) s->ops->event_destroy(s->ctx, s->copied[i]);
        if (s->freed[i]) s->ops->event_destroy(s->ctx, s->freed[i]);
        s->inp_slot[i] = s->tar_slot[i] = NULL;
        s->copied[i] = s->freed[i] = NULL;
    }
    if (s->batch_copied) s->ops->event_destroy(s->ctx, s->batch_copied);
    if (s->norm_mean) s->ops->free(s->ctx, s->norm_mean);
    if (s->norm_std) s->ops->free(s->ctx, s->norm_std);
    s->batch_copied = NULL;
    s->norm_mean = s->norm_std = NULL;
    s->inp_dev = s->tar_dev = NULL;
}

void vb_staging_destroy_copy_ctx(vb_staging *s) {
    if (s->copy_ctx) s->ops->ctx_destroy(s->copy_ctx);
    s->copy_ctx = NULL;
}
