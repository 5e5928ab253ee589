// The line editor's Tab completion, answered by Lua; see lineedit.c.
#include "lineedit_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Tab completion --------------------------------------------------------
// Tab sends the text before the cursor to Lua (an LUDX_EV_LINE wakes it);
// Lua answers with ludx_line_complete while the prompt is still up. An answer
// for text that has changed since is dropped.

void
le_complete_request (void) {
  char *r = malloc(ludx_le.pos + 1);
  if (r == NULL)
    return;
  memcpy(r, ludx_le.buf, ludx_le.pos);
  r[ludx_le.pos] = 0;
  free(ludx_le.comp_req);
  ludx_le.comp_req = r;
  ludx_le.comp_len = ludx_le.pos;
  ludx_le.comp_pending = 1;
  le_post();
}

int
ludx_line_completion (char **text, size_t *len) {
  if (!ludx_le.active || !ludx_le.comp_pending || ludx_le.comp_req == NULL)
    return 0;
  ludx_le.comp_pending = 0;
  char *t = malloc(ludx_le.comp_len + 1);
  if (t == NULL)
    return UV_ENOMEM;
  memcpy(t, ludx_le.comp_req, ludx_le.comp_len + 1);
  *text = t;
  *len = ludx_le.comp_len;
  return 1;
}

void
ludx_line_complete (size_t start, const char **items, const size_t *lens, size_t n) {
  if (!ludx_le.editing || ludx_le.comp_req == NULL)
    return;
  // the line must still be what was asked about
  int same = ludx_le.pos == ludx_le.comp_len && (ludx_le.pos == 0 || memcmp(ludx_le.buf, ludx_le.comp_req, ludx_le.pos) == 0);
  free(ludx_le.comp_req);
  ludx_le.comp_req = NULL;
  if (!same || n == 0 || start > ludx_le.pos)
    return;
  size_t typed = ludx_le.pos - start;
  // the longest prefix all candidates share
  size_t common = lens[0];
  for (size_t i = 1; i < n; i++) {
    size_t j = 0;
    while (j < common && j < lens[i] && items[i][j] == items[0][j])
      j++;
    common = j;
  }
  if (common > typed && memcmp(items[0], ludx_le.buf + start, typed) == 0) {
    le_insert(items[0] + typed, common - typed);
    le_refresh();
    return;
  }
  if (n == 1)
    return;
  // nothing more to add: list the candidates under the prompt
  int width = le_cols();
  size_t colw = 0;
  for (size_t i = 0; i < n && i < COMPLETE_SHOW; i++) {
    if (lens[i] > colw)
      colw = lens[i];
  }
  colw += 2;
  size_t per_row = colw < (size_t) width ? (size_t) width / colw : 1;
  le_outs("\r\n");
  for (size_t i = 0; i < n && i < COMPLETE_SHOW; i++) {
    le_out(items[i], lens[i]);
    if ((i + 1) % per_row == 0 || i + 1 == n || i + 1 == COMPLETE_SHOW) {
      le_outs("\r\n");
    } else {
      for (size_t k = lens[i]; k < colw; k++)
        le_outs(" ");
    }
  }
  if (n > COMPLETE_SHOW) {
    char more[64];
    snprintf(more, sizeof(more), "... and %zu more\r\n", n - COMPLETE_SHOW);
    le_outs(more);
  }
  le_refresh();
}
