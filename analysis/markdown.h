/* markdown.h: values written into Markdown (report.md, compare's tables)
 * so that a run name, sweep value or op name is shown as text and never
 * becomes markup: no table cell split, no raw HTML, no link or image, no
 * code fence closed early, no new block from a line break.
 */
#ifndef VB_ANALYSIS_MARKDOWN_H
#define VB_ANALYSIS_MARKDOWN_H

#include <stdio.h>

/* A table cell (and any inline value): `|`, `\`, backquote, `[` and `]`
 * backslash-escaped, `<` and `&` as entities, CR and LF as spaces. */
void vb_md_cell(FILE *f, const char *s);

/* Prose the program wrote with values inside it (paragraphs, headings,
 * list items): its own markup (backquotes, bold, brackets) stays, while CR
 * and LF become spaces (no new block), `<` and `&` become entities (no raw
 * HTML) and `](` is broken (no inline link or image). */
void vb_md_prose(FILE *f, const char *s);

/* The backquotes of a code fence around text: one more than its longest run
 * of backquotes, at least three, so no line of the text can close it. */
int vb_md_fence_len(const char *text);

#endif
