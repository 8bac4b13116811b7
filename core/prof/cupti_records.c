/* cupti_records.c: one CUPTI activity record into a vb_cupti_rec (cupti_records.h). */
#include "core/prof/cupti_records.h"

static const char *memcpy_name(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[CUDA memcpy Host-to-Device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[CUDA memcpy Device-to-Host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[CUDA memcpy Device-to-Device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[CUDA memcpy Host-to-Host]";
    default: return "[CUDA memcpy Other]";
    }
}

int vb_cupti_decode(const CUpti_Activity *rec, vb_cupti_rec *out) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        *out = (vb_cupti_rec){VB_GACT_KERNEL, k->name ? k->name : "<unnamed kernel>", k->streamId, k->start, k->end,
                              0.0};
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        *out = (vb_cupti_rec){VB_GACT_MEMCPY, memcpy_name(m->copyKind), m->streamId, m->start, m->end,
                              (double)m->bytes};
        return 1;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        *out = (vb_cupti_rec){VB_GACT_MEMSET, "[CUDA memset]", m->streamId, m->start, m->end, (double)m->bytes};
        return 1;
    }
    default: return 0;
    }
}
