/* fuzz_config.c - experiment files (sg_config_parse: the YAML text as
 * `sgdlab run` reads it, from memory).
 *
 * The input is the file's text; after a line "#--set", each further line
 * is one --set override, as on the command line.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "fuzz.h"

enum { MAX_SETS = 8 };

/* Split the --set lines off `text` (a NUL-terminated copy); returns how many. */
static int split_sets(char *text, size_t *len, char **sets) {
  char *mark = strstr(text, "\n#--set\n");
  if (!mark) return 0;
  *len = (size_t)(mark - text) + 1;
  int n = 0;
  for (char *p = mark + 8; *p && n < MAX_SETS;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    sets[n++] = p;
    if (!nl) break;
    p = nl + 1;
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1), *sets[MAX_SETS];
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  size_t len = size;
  int nsets = split_sets(text, &len, sets);
  sg_experiment_t *x = NULL;
  int rc = sg_config_parse(&x, "fuzz.yaml", text, len, sets, nsets);
  fuzz_require((rc == SG_OK) == (x != NULL));
  if (x) {
    fuzz_require(x->nruns >= 1 && x->name && x->config_text);
    for (size_t i = 0; i < x->nruns; i++)
      fuzz_require(x->runs[i].engine && x->runs[i].opts && x->runs[i].workers >= 1);
  } else {
    fuzz_require(sg_err_msg()[0] != '\0'); /* every refusal says why */
  }
  sg_experiment_destroy(&x);
  free(text);
  return 0;
}
