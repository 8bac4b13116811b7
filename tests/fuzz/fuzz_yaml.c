/* fuzz_yaml: vb_yaml_load, the one YAML loader of every config (run config,
 * benchy, scenarios, machine and reference files), on any text. Deep nesting
 * is what it must refuse quickly (-timeout catches a slow one); a document it
 * accepts must be no deeper than VB_YAML_MAX_DEPTH, counted here
 * independently from libyaml's events. */
#include <stdbool.h>
#include <stdlib.h>
#include <yaml.h>

#include "core/util/yaml_util.h"
#include "tests/fuzz/fuzz_util.h"

/* the deepest nesting of lists and mappings in the text, stopping one level
 * past the cap (-1 when libyaml cannot parse it) */
static int event_depth(const uint8_t *data, size_t size) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) abort();
    yaml_parser_set_input_string(&p, data, size);
    int depth = 0, deepest = 0;
    for (bool done = false; !done && deepest <= VB_YAML_MAX_DEPTH;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            deepest = -1;
            break;
        }
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > deepest) deepest = depth;
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return deepest;
}

static void load(const char *path, const uint8_t *data, size_t size) {
    yaml_document_t doc;
    vb_yaml_load(&doc, path, path);
    yaml_document_delete(&doc);
    /* accepted: it must have been within the cap */
    if (event_depth(data, size) > VB_YAML_MAX_DEPTH) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vb_fuzz_run(data, size, ".yaml", load);
    return 0;
}
