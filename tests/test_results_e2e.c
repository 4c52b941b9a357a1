/* test_results_e2e.c - a real `sgdlab run`, then what people look at:
 * `sgdlab trace` of one of its runs, and its index.html opened in headless
 * Chromium (a screenshot that is not blank; the DOM after the page's
 * script ran, sorted by its URL, with planted markup inert).
 *
 * Chromium is found on PATH (or SGDLAB_CHROMIUM); scripts/setup.sh
 * installs it.  Without it the browser checks are skipped with the reason,
 * unless SGDLAB_REQUIRE_CHROMIUM=1 (scripts/test.sh sets it) makes that a
 * failure.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "json_check.h"
#include "run_util.h"
#include "test.h"

static char tmpdir[256], db[320];

static const char CONFIG[] =
    "name: browse\n"
    "workload: {dataset: fashion-mnist, model: softmax, batch: 32, lr: 0.05,\n"
    "           max_steps: 30, eval_every: 10, train_samples: 3000,\n"
    "           test_samples: 1000, seed: 1}\n"
    "workers: 2\n"
    "engines:\n"
    "  - {engine: ps, mode: sync}\n"
    "  - {engine: allreduce, algorithm: ring, transport: zmq}\n";

/* sgdlab in tmpdir (run_util.h: ru_sgdlab_in). */
#define sgdlab(out, ...) ru_sgdlab_in(tmpdir, out, __VA_ARGS__)

static void cleanup(void) { ru_rm_rf(tmpdir); }


/* The run, once for all tests. */
static int setup(void) {
  static int done = -1;
  char path[600], *out = NULL;
  if (done >= 0) return done;
  done = 0;
  if (ru_mkdtemp(tmpdir, sizeof tmpdir, "results-e2e")) return 0;
  atexit(cleanup);
  snprintf(db, sizeof db, "%s/browse.db", tmpdir);
  snprintf(path, sizeof path, "%s/browse.yaml", tmpdir);
  if (ru_write_file(path, CONFIG)) return 0;
  int rc = sgdlab(&out, "run", "browse.yaml", "--db", "browse.db", NULL);
  if (rc) fprintf(stderr, "sgdlab run: exit %d: %s\n", rc, out);
  free(out);
  return done = rc == 0;
}

TEST(trace_of_a_real_run) {
  char *out = NULL, path[600];
  CHECK(setup());
  long long run = ru_db_int(db, "SELECT id FROM runs WHERE engine = 'ps'");
  CHECK(run > 0);
  char id[32];
  snprintf(id, sizeof id, "%lld", run);
  int rc = sgdlab(&out, "trace", id, "--db", "browse.db", "--out", "ps.json", NULL);
  CHECK_MSG(rc == 0, "sgdlab trace: exit %d: %s", rc, out);
  free(out);
  snprintf(path, sizeof path, "%s/ps.json", tmpdir);
  char *json = ru_slurp(path, 1 << 26);
  CHECK(json);
  size_t at = 0;
  CHECK_MSG(jc_valid(json, &at), "invalid JSON at byte %zu", at);
  /* one track per rank: 1 server + 2 workers */
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(DISTINCT rank) FROM (SELECT rank FROM ranks WHERE"
                            " run_id = %lld UNION SELECT rank FROM steps WHERE run_id = %lld)",
           run, run);
  CHECK_EQ_INT((int)ru_db_int(db, sql), 3);
  CHECK_EQ_INT((int)jc_count(json, "\"name\":\"thread_name\""), 3);
  CHECK_STR_CONTAINS(json, "\"rank 0 server\"");
  CHECK_STR_CONTAINS(json, "\"rank 2 worker\"");
  snprintf(sql, sizeof sql, "SELECT sum((compute_s > 0) + (comm_s > 0) + (wait_s > 0))"
                            " FROM steps WHERE run_id = %lld", run);
  long long want = ru_db_int(db, sql);
  CHECK(want >= 3 * 30);
  CHECK_EQ_INT((int)jc_count(json, "\"ph\":\"X\""), (int)want);
  free(json);
}

/* ---- the browser --------------------------------------------------------- */

static const char *chromium(void) {
  static char found[512];
  const char *env = getenv("SGDLAB_CHROMIUM"), *path = getenv("PATH");
  if (env && *env) return env;
  for (const char *p = path ? path : ""; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(found, sizeof found, "%.*s/chromium", (int)len, p);
    if (access(found, X_OK) == 0) return found;
    p += len + (p[len] == ':');
  }
  return NULL;
}

/* 1: chromium is there; 0: skip (said why); -1: required but missing. */
static int have_chromium(const char *test) {
  if (chromium()) return 1;
  const char *req = getenv("SGDLAB_REQUIRE_CHROMIUM");
  if (req && !strcmp(req, "1")) {
    fprintf(stderr, "%s: chromium not found and SGDLAB_REQUIRE_CHROMIUM=1"
                    " (bash scripts/setup.sh installs it)\n", test);
    return -1;
  }
  fprintf(stderr, "SKIP %s: chromium not found on PATH (bash scripts/setup.sh installs"
                  " it; SGDLAB_CHROMIUM names another binary)\n", test);
  return 0;
}

/* chromium --headless MODE URL with a fresh profile, its stdout into
 * outpath; at most 90 s.  The exit code, -1 when it hung or did not run. */
static int browse(const char *mode, const char *url, const char *outpath) {
  char profile[512], win[] = "--window-size=1280,2000";
  snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-XXXXXX", tmpdir);
  if (!mkdtemp(profile + strlen("--user-data-dir="))) return -1;
  char *argv[] = {(char *)chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", profile, win,
                  (char *)mode, (char *)url, NULL};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_WRONLY);
    if (fd < 0 || null < 0) _exit(126);
    dup2(fd, 1);
    dup2(null, 2); /* its D-Bus complaints */
    execv(argv[0], argv);
    _exit(127);
  }
  int rc = pid < 0 ? -1 : ru_wait_exit_code(pid, 90);
  ru_rm_rf(profile + strlen("--user-data-dir="));
  return rc;
}

/* ---- is a PNG blank? --------------------------------------------------------- */

typedef struct pngstat {
  uint32_t w, h;
  int colors;      /* distinct colors, 4 bits per channel */
  double dominant; /* fraction of pixels in the most common of them */
} pngstat_t;

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Undo the PNG row filters in place (bpp bytes per pixel). */
static int unfilter(unsigned char *raw, uint32_t w, uint32_t h, int bpp) {
  size_t stride = (size_t)w * bpp;
  for (uint32_t y = 0; y < h; y++) {
    unsigned char *row = raw + y * (stride + 1), *cur = row + 1;
    unsigned char *up = y ? raw + (y - 1) * (stride + 1) + 1 : NULL;
    int ft = row[0];
    for (size_t i = 0; i < stride; i++) {
      int a = i >= (size_t)bpp ? cur[i - bpp] : 0, b = up ? up[i] : 0;
      int c = up && i >= (size_t)bpp ? up[i - bpp] : 0;
      switch (ft) {
      case 0: break;
      case 1: cur[i] += a; break;
      case 2: cur[i] += b; break;
      case 3: cur[i] += (a + b) / 2; break;
      case 4: cur[i] += paeth(a, b, c); break;
      default: return -1;
      }
    }
  }
  return 0;
}

/* Decode an 8-bit RGB(A) non-interlaced PNG and histogram its colors. */
static int png_stat(const char *path, pngstat_t *ps) {
  unsigned char *buf = (unsigned char *)ru_slurp(path, 1 << 26), *idat = NULL, *raw = NULL;
  size_t len = 0, nidat = 0, at = 8;
  int bpp = 0, rc = -1;
  struct stat sb;
  if (!buf || stat(path, &sb) != 0) goto done;
  len = (size_t)sb.st_size;
  if (len < 8 || memcmp(buf, "\x89PNG\r\n\x1a\n", 8)) goto done;
  idat = malloc(len);
  while (idat && at + 12 <= len) {
    uint32_t n = be32(buf + at);
    const unsigned char *type = buf + at + 4, *data = buf + at + 8;
    if (at + 12 + n > len) goto done;
    if (!memcmp(type, "IHDR", 4)) {
      ps->w = be32(data);
      ps->h = be32(data + 4);
      if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0) goto done;
      bpp = data[9] == 6 ? 4 : 3;
    } else if (!memcmp(type, "IDAT", 4)) {
      memcpy(idat + nidat, data, n);
      nidat += n;
    }
    at += 12 + n;
  }
  if (!bpp || !ps->w || !ps->h || ps->w > 10000 || ps->h > 10000) goto done;
  uLongf rawlen = (uLongf)ps->h * (1 + (uLongf)ps->w * bpp);
  if (!(raw = malloc(rawlen)) || uncompress(raw, &rawlen, idat, nidat) != Z_OK ||
      rawlen != (uLongf)ps->h * (1 + (uLongf)ps->w * bpp) ||
      unfilter(raw, ps->w, ps->h, bpp))
    goto done;
  static uint32_t hist[4096];
  memset(hist, 0, sizeof hist);
  for (uint32_t y = 0; y < ps->h; y++)
    for (uint32_t x = 0; x < ps->w; x++) {
      const unsigned char *p = raw + y * (1 + (size_t)ps->w * bpp) + 1 + (size_t)x * bpp;
      hist[(p[0] >> 4) << 8 | (p[1] >> 4) << 4 | p[2] >> 4]++;
    }
  uint32_t top = 0;
  ps->colors = 0;
  for (int i = 0; i < 4096; i++) {
    ps->colors += hist[i] > 0;
    if (hist[i] > top) top = hist[i];
  }
  ps->dominant = (double)top / ((double)ps->w * ps->h);
  rc = 0;
done:
  free(buf);
  free(idat);
  free(raw);
  return rc;
}

/* Not blank: many colors, and no single one covers (nearly) everything. */
static int png_not_blank(const pngstat_t *ps) { return ps->colors >= 16 && ps->dominant < 0.95; }

/* Plant markup where a page shows database strings: the experiment name
 * and a run_info value try to set an attribute on <body>. */
static int plant(void) {
  static int planted;
  if (planted++) return 0;
  sqlite3 *h = NULL;
  int ok = sqlite3_open(db, &h) == SQLITE_OK &&
           sqlite3_exec(h,
                        "UPDATE experiments SET name = name || '<img src=x onerror="
                        "\"document.body.setAttribute(''data-pwned'',''1'')\">';"
                        "INSERT INTO run_info SELECT id, 'planted', '<script>document.body."
                        "setAttribute(''data-pwned'',''2'')</script>' FROM runs",
                        NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(h);
  return ok ? 0 : -1;
}

/* data-v of the first row of table tbl-ID in a dumped DOM ("" when none). */
static const char *first_row_key(const char *dom, const char *id, char *buf, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "id=\"tbl-%s\"", id);
  const char *t = strstr(dom, pat), *b = t ? strstr(t, "<tbody>") : NULL;
  const char *v = b ? strstr(b, "data-v=\"") : NULL;
  buf[0] = '\0';
  if (v) snprintf(buf, cap, "%.*s", (int)strcspn(v + 8, "\""), v + 8);
  return buf;
}

TEST(index_html_in_a_browser) {
  char *out = NULL, path[600], shot[640], url[700], key[64];
  int have = have_chromium("index_html_in_a_browser");
  CHECK(have >= 0);
  if (!have) return;
  CHECK(setup());
  CHECK(plant() == 0);
  int rc = sgdlab(&out, "report", "1", "--db", "browse.db", "--out", "rep", NULL);
  CHECK_MSG(rc == 0, "sgdlab report: exit %d: %s", rc, out);
  free(out);

  /* a screenshot of the page: the size asked for, and not blank */
  pngstat_t ps = {0};
  snprintf(shot, sizeof shot, "--screenshot=%s/shot.png", tmpdir);
  snprintf(url, sizeof url, "file://%s/rep/index.html", tmpdir);
  snprintf(path, sizeof path, "%s/chromium.out", tmpdir);
  CHECK_EQ_INT(browse(shot, url, path), 0);
  CHECK(png_stat(shot + strlen("--screenshot="), &ps) == 0);
  CHECK_EQ_INT((int)ps.w, 1280);
  CHECK_EQ_INT((int)ps.h, 2000);
  CHECK_MSG(png_not_blank(&ps), "%d colors, dominant %.3f", ps.colors, ps.dominant);
  /* the blank check can fail: an empty page is blank */
  pngstat_t blank = {0};
  snprintf(path, sizeof path, "%s/blank.html", tmpdir);
  CHECK(ru_write_file(path, "<!DOCTYPE html><html><body></body></html>\n") == 0);
  snprintf(url, sizeof url, "file://%s/blank.html", tmpdir);
  snprintf(shot, sizeof shot, "--screenshot=%s/blank.png", tmpdir);
  snprintf(path, sizeof path, "%s/chromium.out", tmpdir);
  CHECK_EQ_INT(browse(shot, url, path), 0);
  CHECK(png_stat(shot + strlen("--screenshot="), &blank) == 0);
  CHECK_MSG(!png_not_blank(&blank), "%d colors, dominant %.3f", blank.colors, blank.dominant);

  /* the DOM after the page's script ran: unsorted, the first run first */
  snprintf(url, sizeof url, "file://%s/rep/index.html", tmpdir);
  CHECK_EQ_INT(browse("--dump-dom", url, path), 0);
  char *dom = ru_slurp(path, 1 << 24);
  CHECK(dom && strstr(dom, "</html>"));
  CHECK_STR_CONTAINS(dom, "class=\"sortable js\""); /* the nonce'd script ran */
  CHECK(!strcmp(first_row_key(dom, "runs", key, sizeof key), "1"));
  /* planted markup is text in the DOM, and none of it ran */
  CHECK(!strstr(dom, "data-pwned=\""));
  CHECK_STR_CONTAINS(dom, "&lt;img src=x onerror=");
  CHECK_STR_CONTAINS(dom, "&lt;script&gt;document.body.setAttribute");
  free(dom);
  /* sorted by its URL: run id descending */
  snprintf(url, sizeof url, "file://%s/rep/index.html#sort=runs:0:desc", tmpdir);
  CHECK_EQ_INT(browse("--dump-dom", url, path), 0);
  CHECK((dom = ru_slurp(path, 1 << 24)));
  CHECK(!strcmp(first_row_key(dom, "runs", key, sizeof key), "2"));
  CHECK_STR_CONTAINS(dom, "aria-sort=\"descending\"");
  free(dom);
}

/* `sgdlab trace --html`: the page, opened in Chromium, parses the embedded
 * trace and draws every slice of it; planted markup stays text. */
TEST(trace_html_in_a_browser) {
  char *out = NULL, path[600], shot[640], url[700], id[32], sql[256], want_attr[64];
  int have = have_chromium("trace_html_in_a_browser");
  CHECK(have >= 0);
  if (!have) return;
  CHECK(setup());
  CHECK(plant() == 0);
  long long run = ru_db_int(db, "SELECT id FROM runs WHERE engine = 'ps'");
  CHECK(run > 0);
  snprintf(id, sizeof id, "%lld", run);
  int rc = sgdlab(&out, "trace", id, "--db", "browse.db", "--html", "ps.html", NULL);
  CHECK_MSG(rc == 0, "sgdlab trace --html: exit %d: %s", rc, out);
  free(out);
  snprintf(sql, sizeof sql, "SELECT sum((compute_s > 0) + (comm_s > 0) + (wait_s > 0))"
                            " FROM steps WHERE run_id = %lld", run);
  long long want = ru_db_int(db, sql);
  CHECK(want >= 3 * 30);

  /* the whole run (#all): the script drew one rect per slice, three tracks */
  snprintf(url, sizeof url, "file://%s/ps.html#all", tmpdir);
  snprintf(path, sizeof path, "%s/chromium.out", tmpdir);
  CHECK_EQ_INT(browse("--dump-dom", url, path), 0);
  char *dom = ru_slurp(path, 1 << 24);
  CHECK(dom && strstr(dom, "</html>"));
  snprintf(want_attr, sizeof want_attr, "data-slices=\"%lld\"", want);
  CHECK_STR_CONTAINS(dom, want_attr);
  CHECK_EQ_INT((int)jc_count(dom, "<rect class="), (int)want);
  CHECK_STR_CONTAINS(dom, ">rank 0 server<");
  CHECK_STR_CONTAINS(dom, ">rank 2 worker<");
  CHECK(!strstr(dom, "data-pwned=\""));
  CHECK_STR_CONTAINS(dom, "&lt;img src=x onerror=");
  /* zoom and pan: the page's own buttons */
  CHECK_STR_CONTAINS(dom, "<button id=\"zin\">zoom in</button>");
  CHECK_STR_CONTAINS(dom, "<button id=\"left\">");
  free(dom);
  /* opened zoomed in (#view=A,B, seconds): only the slices in that window */
  snprintf(url, sizeof url, "file://%s/ps.html#view=0,0.00002", tmpdir);
  CHECK_EQ_INT(browse("--dump-dom", url, path), 0);
  dom = ru_slurp(path, 1 << 24);
  CHECK(dom && strstr(dom, "</html>"));
  int zoomed = (int)jc_count(dom, "<rect class=");
  CHECK_MSG(zoomed < want / 2, "zoomed to 20 us: %d of %lld slices drawn", zoomed, want);
  free(dom);

  /* and it is a picture, not a blank page */
  pngstat_t ps = {0};
  snprintf(shot, sizeof shot, "--screenshot=%s/trace.png", tmpdir);
  snprintf(url, sizeof url, "file://%s/ps.html", tmpdir);
  CHECK_EQ_INT(browse(shot, url, path), 0);
  CHECK(png_stat(shot + strlen("--screenshot="), &ps) == 0);
  /* a short page in a 2000-pixel window: mostly white, but not blank
   * (a blank page has one color; index_html_in_a_browser shows that) */
  CHECK_MSG(ps.colors >= 16 && ps.dominant < 0.99, "%d colors, dominant %.3f", ps.colors,
            ps.dominant);
}
