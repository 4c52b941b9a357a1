/* test_show_text.c - `sgdlab list` and `sgdlab show` with hostile text in
 * the database, as real processes.
 *
 * An experiment name and a dump_params path carry terminal controls: an
 * OSC title sequence (ESC ] ... BEL), a C1 CSI (U+009B, "clear screen"),
 * a carriage return and a tab; the dump_params path fails the rank, so
 * the run's error and the rank's message hold an ESC too.  Both commands
 * must succeed (a control byte in options_json once made the whole
 * database unreadable: "reading runs: malformed JSON"), write none of
 * those bytes, show them as \xHH, and keep well-formed UTF-8 as it is.
 */
#include "run_util.h"
#include "test.h"

static const char cfg_text[] =
    "name: \"x\\e]0;OWNED\\a\\u009b2J\\rtab\\tG\\u00f6\\u00dfe\"\n"
    "workers: 1\n"
    "workload: {dataset: fashion-mnist, model: softmax, batch: 64, max_steps: 10,\n"
    "           eval_every: 10, dump_params: \"/nonexistent\\e[2J/p\"}\n"
    "engines: [local]\n";

/* The first terminal control byte in out (C0 but newline, DEL, or a C1
 * control as UTF-8), or NULL. */
static const char *control_byte(const char *out) {
  for (const unsigned char *p = (const unsigned char *)out; *p; p++)
    if ((*p < 0x20 && *p != '\n') || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
      return (const char *)p;
  return NULL;
}

static void check_output(const char *what, int code, const char *out) {
  const char *bad = control_byte(out);
  CHECK_MSG(code == 0, "%s: exit %d: %.300s", what, code, out);
  CHECK_MSG(!bad, "%s: control byte 0x%02x at offset %td", what, bad ? (unsigned char)*bad : 0,
            bad ? bad - out : 0);
  CHECK_STR_CONTAINS(out, "x\\x1b]0;OWNED\\x07\\xc2\\x9b2J\\x0dtab\\x09G\xc3\xb6\xc3\x9f" "e");
}

TEST(list_and_show_escape_terminal_controls_from_the_database) {
  char dir[64], cfg[128], db[128], out[65536];
  CHECK(ru_mkdtemp(dir, sizeof dir, "showtext") == 0);
  snprintf(cfg, sizeof cfg, "%s/esc.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK(ru_write_file(cfg, cfg_text) == 0);
  char *run[] = {NULL, "run", cfg, "--db", db, "-q", NULL};
  int code = ru_run(run, 1, NULL, out, sizeof out);
  CHECK_MSG(code == 1, "the run should fail on dump_params: exit %d: %s", code, out);
  /* the rank's message quotes the path escaped already (sg_err_set), so
   * the row holds no control byte; the experiment's name below is stored
   * raw and is what list and show must escape */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE instr(error, char(27)) > 0"), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE instr(error, '\\x1b[2J') > 0"), 1);

  char *list[] = {NULL, "list", "--db", db, NULL};
  code = ru_run(list, 1, NULL, out, sizeof out);
  check_output("list", code, out);

  char *show[] = {NULL, "show", "1", "--db", db, NULL};
  code = ru_run(show, 1, NULL, out, sizeof out);
  check_output("show", code, out);
  CHECK_STR_CONTAINS(out, "/nonexistent\\x1b[2J/p: No such file");
  ru_rm_rf(dir);
}
