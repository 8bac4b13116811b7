/* trace_lanes.c: lane ids and UTF-8 cleaning for the trace writers
 * (trace_lanes.h). */
#include "analysis/trace_lanes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"

int vb_trace_numbered_lane(const char *lane, const char *prefix, long limit) {
    size_t n = strlen(prefix);
    if (strncmp(lane, prefix, n) != 0 || !lane[n]) return -1;
    if (lane[n] == '-' || lane[n] == '+' || lane[n] == ' ') return -1;
    char *end;
    errno = 0;
    long k = strtol(lane + n, &end, 10);
    if (*end || errno || k < 0 || k >= limit) return -1;
    return (int)k;
}

static int known_tid(const char *lane) {
    if (strcmp(lane, "main") == 0) return 0;
    if (strcmp(lane, "comm") == 0) return 1;
    int k = vb_trace_numbered_lane(lane, "loader", 90);
    if (k >= 0) return 10 + k;
    k = vb_trace_numbered_lane(lane, "stream", 100000);
    if (k >= 0) return 100 + k;
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void vb_trace_assign_tids(const vb_timeline *t, int *tid) {
    const char **other = vb_malloc_check((t->n > 0 ? (size_t)t->n : 1) * sizeof *other);
    int no = 0;
    for (int i = 0; i < t->n; i++) {
        tid[i] = known_tid(t->ev[i].lane);
        if (tid[i] < 0) other[no++] = t->ev[i].lane;
    }
    if (no > 1) qsort(other, (size_t)no, sizeof *other, cmp_str);
    int nu = 0;
    for (int i = 0; i < no; i++)
        if (nu == 0 || strcmp(other[nu - 1], other[i]) != 0) other[nu++] = other[i];
    for (int i = 0; i < t->n; i++) {
        if (tid[i] >= 0) continue;
        const char *key = t->ev[i].lane;
        const char **hit = bsearch(&key, other, (size_t)nu, sizeof *other, cmp_str);
        tid[i] = VB_TRACE_TID_OTHER_BASE + (int)(hit - other);
    }
    free(other);
}

char *vb_trace_utf8_clean(const char *s) {
    size_t len = strlen(s);
    char *out = vb_malloc_check(3 * len + 1); /* each bad byte grows to 3 */
    const unsigned char *p = (const unsigned char *)s;
    size_t k = 0;
    while (*p) {
        int n = vb_utf8_len(p);
        if (n == 0) {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
            p++;
        } else {
            memcpy(out + k, p, (size_t)n);
            k += (size_t)n;
            p += n;
        }
    }
    out[k] = '\0';
    return out;
}

int vb_trace_depth_of(const char *kind) {
    if (strcmp(kind, "trial") == 0) return 0;
    if (strcmp(kind, "step") == 0) return 1;
    if (strcmp(kind, "phase") == 0) return 2;
    if (strcmp(kind, "marker") == 0) return 4;
    return 3;
}
