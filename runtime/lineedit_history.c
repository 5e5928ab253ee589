// The line editor's history (kept, browsed, saved to a file) and its
// Ctrl-R reverse incremental search; see lineedit.c.
#include "lineedit_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- Ctrl-R ----------------------------------------------------------------

// The newest entry at or below `from` containing the query (hist_n: none).
static size_t
search_from (size_t from) {
  if (ludx_le.hist_n == 0)
    return ludx_le.hist_n;
  if (from >= ludx_le.hist_n)
    from = ludx_le.hist_n - 1;
  for (size_t i = from + 1; i-- > 0;) {
    if (ludx_le.query_len == 0 || strstr(ludx_le.hist[i], ludx_le.query) != NULL)
      return i;
  }
  return ludx_le.hist_n;
}

void
le_refresh_search (void) {
  le_outs(ludx_le.match < ludx_le.hist_n ? "\r(reverse-i-search)`" : "\r(failed reverse-i-search)`");
  le_out(ludx_le.query, ludx_le.query_len);
  le_outs("': ");
  if (ludx_le.match < ludx_le.hist_n)
    le_outs(ludx_le.hist[ludx_le.match]);
  le_outs("\033[K");
  fflush(stdout);
}

void
le_search_start (void) {
  free(ludx_le.search_orig);
  ludx_le.search_orig = strdup(ludx_le.len ? ludx_le.buf : "");
  ludx_le.searching = 1;
  ludx_le.query_len = 0;
  ludx_le.query[0] = 0;
  ludx_le.match = ludx_le.hist_n ? ludx_le.hist_n - 1 : 0;
}

// Leaves the search with the match (or the original line) in the editor.
void
le_search_end (int keep) {
  ludx_le.searching = 0;
  if (keep && ludx_le.match < ludx_le.hist_n)
    le_set_line(ludx_le.hist[ludx_le.match]);
  else
    le_set_line(ludx_le.search_orig ? ludx_le.search_orig : "");
  free(ludx_le.search_orig);
  ludx_le.search_orig = NULL;
  ludx_le.hist_pos = ludx_le.hist_n;
}

// A key while searching: 1 when it was used, 0 when the search ended and
// the key is for the editor.
int
le_search_key (unsigned char c) {
  if (c == 18) { // Ctrl-R again: an older match
    if (ludx_le.match < ludx_le.hist_n && ludx_le.match > 0) {
      size_t m = search_from(ludx_le.match - 1);
      if (m < ludx_le.hist_n)
        ludx_le.match = m;
    }
  } else if (c == 7) { // Ctrl-G: back to the line as it was
    le_search_end(0);
  } else if (c == 127 || c == 8) {
    if (ludx_le.query_len > 0)
      ludx_le.query[--ludx_le.query_len] = 0;
    ludx_le.match = search_from(ludx_le.hist_n - 1);
  } else if (c >= 32 && c != 127) {
    if (ludx_le.query_len < SEARCH_MAX) {
      ludx_le.query[ludx_le.query_len++] = (char) c;
      ludx_le.query[ludx_le.query_len] = 0;
    }
    size_t m = search_from(ludx_le.match < ludx_le.hist_n ? ludx_le.match : ludx_le.hist_n - 1);
    ludx_le.match = m;
  } else {
    le_search_end(1);
    return 0;
  }
  le_refresh();
  return 1;
}

void
le_history_move (int dir) {
  if (ludx_le.hist_n == 0)
    return;
  if (dir < 0 && ludx_le.hist_pos == 0)
    return;
  if (dir > 0 && ludx_le.hist_pos >= ludx_le.hist_n)
    return;
  if (ludx_le.hist_pos == ludx_le.hist_n) {
    free(ludx_le.saved);
    ludx_le.saved = strdup(ludx_le.len ? ludx_le.buf : "");
  }
  ludx_le.hist_pos += dir;
  le_set_line(ludx_le.hist_pos == ludx_le.hist_n ? (ludx_le.saved ? ludx_le.saved : "") : ludx_le.hist[ludx_le.hist_pos]);
}

void
le_history_load (const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] == '\n')
      line[--n] = 0;
    if (n > 0)
      ludx_line_add_history(line);
  }
  free(line);
  fclose(f);
}

void
le_history_save (void) {
  if (ludx_le.history_path == NULL)
    return;
  FILE *f = fopen(ludx_le.history_path, "w");
  if (f == NULL)
    return;
  for (size_t i = 0; i < ludx_le.hist_n; i++)
    fprintf(f, "%s\n", ludx_le.hist[i]);
  fclose(f);
}
void
ludx_line_add_history (const char *line) {
  if (line[0] == 0)
    return;
  if (ludx_le.hist_n > 0 && strcmp(ludx_le.hist[ludx_le.hist_n - 1], line) == 0)
    return;
  if (ludx_le.hist_n == HISTORY_MAX) {
    free(ludx_le.hist[0]);
    memmove(ludx_le.hist, ludx_le.hist + 1, (HISTORY_MAX - 1) * sizeof(char *));
    ludx_le.hist_n--;
  }
  char **h = realloc(ludx_le.hist, (ludx_le.hist_n + 1) * sizeof(char *));
  if (h == NULL)
    return;
  ludx_le.hist = h;
  // multi-line chunks are kept as one entry on one line
  char *copy = strdup(line);
  if (copy == NULL)
    return;
  for (char *p = copy; *p; p++) {
    if (*p == '\n')
      *p = ' ';
  }
  ludx_le.hist[ludx_le.hist_n++] = copy;
  ludx_le.hist_pos = ludx_le.hist_n;
}
