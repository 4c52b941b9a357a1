/* plot.c - gnuplot scripts and the gnuplot child process (see plot.h). */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "outfile.h"

/* Figures are 1000x560: wide enough for a key outside the plot area. */
#define PLOT_W 1000
#define PLOT_H 560

const char *sg_plot_program(void) {
  const char *p = getenv("SGDLAB_GNUPLOT");
  return p && *p ? p : "gnuplot";
}

int sg_plot_available(void) {
  const char *prog = sg_plot_program();
  const char *path = getenv("PATH");
  char buf[PATH_MAX];
  if (strchr(prog, '/')) {
    if (access(prog, X_OK) == 0) return SG_OK;
  } else {
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
      const char *colon = strchr(p, ':');
      size_t len = colon ? (size_t)(colon - p) : strlen(p);
      snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", prog);
      if (access(buf, X_OK) == 0) return SG_OK;
      p += len + (colon ? 1 : 0);
    }
  }
  return sg_err_set(SG_ENOTFOUND,
                    "gnuplot not found ('%s'): install it (apt-get install"
                    " gnuplot-nox) or set SGDLAB_GNUPLOT to its path",
                    prog);
}

/* U+2019 RIGHT SINGLE QUOTATION MARK, for a quote gnuplot cannot read. */
#define QUOTE_SUBST "\xe2\x80\x99"

void sg_plot_quote(FILE *gp, const char *s) {
  int after_text = 0; /* the last character written is not a quote */
  fputc('\'', gp);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    /* gnuplot reads '' as a quote only right after another character of
     * the string: first in the string or after a quote it would end the
     * string instead, so such a quote is written as a typographic one. */
    if (c == '\'') fputs(after_text ? "''" : QUOTE_SUBST, gp);
    else fputc(c < 0x20 || c == 0x7f ? ' ' : c, gp);
    after_text = c != '\'';
  }
  fputc('\'', gp);
}

/* A UTF-8 continuation byte: not a place to cut. */
static int utf8_cont(const char *p) { return ((unsigned char)*p & 0xC0) == 0x80; }

const char *sg_plot_shorten(const char *s, size_t max, char *buf, size_t cap) {
  size_t len = strlen(s), head, tail;
  if (max < 8) max = 8;
  if (max + 1 > cap) max = cap - 1;
  if (len <= max) {
    snprintf(buf, cap, "%s", s);
    return buf;
  }
  /* head ... tail: the ends tell variants apart (engine first, swept
   * settings and N last) */
  head = max / 2;
  while (head > 0 && utf8_cont(s + head)) head--;
  tail = len - (max - 3 - max / 2);
  while (tail < len && utf8_cont(s + tail)) tail++;
  snprintf(buf, cap, "%.*s...%s", (int)head, s, s + tail);
  return buf;
}

void sg_plot_label(FILE *gp, const char *s) {
  char buf[SG_PLOT_LABEL_MAX + 8];
  sg_plot_quote(gp, sg_plot_shorten(s, SG_PLOT_LABEL_MAX, buf, sizeof buf));
}

void sg_plot_set_text(FILE *gp, const char *what, const char *text) {
  fprintf(gp, "set %s ", what);
  sg_plot_quote(gp, text);
  fputs(" noenhanced\n", gp);
}

void sg_plot_title(FILE *gp, const char *text) {
  fputs(" title ", gp);
  sg_plot_label(gp, text);
  fputs(" noenhanced", gp);
}

void sg_plot_data_text(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    fputc(c < 0x20 || c == 0x7f ? ' ' : c, f);
  }
}

/* `set output 'NAME.EXT'` */
static void set_output(FILE *f, const char *name, const char *ext) {
  char file[PATH_MAX];
  snprintf(file, sizeof file, "%s.%s", name, ext);
  fputs("set output ", f);
  sg_plot_quote(f, file);
  fputc('\n', f);
}

int sg_plot_begin(FILE **gp, const char *dir, const char *name,
                  const char *title) {
  return sg_plot_begin_size(gp, dir, name, title, PLOT_W, PLOT_H);
}

int sg_plot_begin_size(FILE **gp, const char *dir, const char *name,
                       const char *title, int w, int h) {
  char file[PATH_MAX];
  FILE *f;
  snprintf(file, sizeof file, "%s.gp", name);
  *gp = NULL;
  SG_CHECK(sg_out_fopen(&f, dir, file));
  /* Constant strings below are single-quoted like all text (plot.h). */
  fprintf(f,
          "# %s.gp - written by `sgdlab report` from the results database.\n"
          "# Redraw with: gnuplot %s.gp (in this directory).\n"
          "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "  set terminal pngcairo size %d,%d font 'sans,11' noenhanced\n"
          "} else {\n"
          "  set terminal png size %d,%d noenhanced\n"
          "}\n",
          name, name, w, h, w, h);
  set_output(f, name, "png");
  fputs("set datafile separator tab\n"
        "set datafile missing 'nan'\n"
        "set grid lc rgb '#d0d0d0'\n"
        "set key outside right top vertical Left reverse noenhanced\n"
        "set border 3\nset tics nomirror\n",
        f);
  sg_plot_set_text(f, "title", title);
  *gp = f;
  return SG_OK;
}

/* Run gnuplot on `script` with cwd `dir` (its checked descriptor,
 * outfile.h: gnuplot writes its images there by name); stderr (where gnuplot reports)
 * is collected to quote its first line on failure. */
static int run_gnuplot(const char *dir, const char *script) {
  int pipefd[2], status = 0, dirfd = sg_out_dir_fd(dir);
  if (dirfd < 0) return sg_err_set(SG_EINTERNAL, "gnuplot: %s was not opened as an output", dir);
  char out[4096];
  size_t used = 0;
  pid_t pid;
  if (pipe(pipefd) != 0)
    return sg_err_set(SG_EIO, "pipe for gnuplot: %s", strerror(errno));
  pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return sg_err_set(SG_EIO, "fork for gnuplot: %s", strerror(errno));
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
    }
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    if (fchdir(dirfd) != 0) _exit(126);
    execlp(sg_plot_program(), sg_plot_program(), script, (char *)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  for (;;) {
    ssize_t k = read(pipefd[0], out + used, sizeof out - 1 - used);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    used += (size_t)k;
    if (used == sizeof out - 1) { /* keep draining, keep the start */
      char sink[512];
      while (read(pipefd[0], sink, sizeof sink) > 0) {}
      break;
    }
  }
  out[used] = '\0';
  close(pipefd[0]);
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return sg_err_set(SG_EIO, "waiting for gnuplot: %s", strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return SG_OK;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return sg_err_set(SG_ENOTFOUND, "cannot run gnuplot ('%s') for %s/%s",
                      sg_plot_program(), dir, script);
  /* gnuplot's message: the last nonblank lines name the script line. */
  for (char *p = out; *p; p++)
    if (*p == '\n') *p = ' ';
  if (WIFEXITED(status))
    return sg_err_set(SG_EIO, "gnuplot failed on %s/%s (exit %d): %.300s", dir,
                      script, WEXITSTATUS(status), out);
  return sg_err_set(SG_EIO, "gnuplot killed by signal %d on %s/%s", WTERMSIG(status),
                    dir, script);
}

void sg_plot_multi_begin(FILE *gp, const char *name, int w, int h, int rows, int cols,
                         const char *title) {
  /* replot redraws only a multiplot's last panel: the panels are drawn
   * twice, once per output */
  fprintf(gp, "unset title\ndo for [sg_pass = 1:2] {\nif (sg_pass == 2) {\n"
              "set terminal svg size %d,%d dynamic font 'sans,11' noenhanced\n", w, h);
  set_output(gp, name, "svg");
  fputs("}\nset multiplot title ", gp);
  sg_plot_quote(gp, title);
  /* fixed room in pixels: the title, tick labels, axis and panel titles */
  fprintf(gp, " noenhanced layout %d,%d margins %.4f,%.4f,%.4f,%.4f spacing %.4f,%.4f\n",
          rows, cols, 78.0 / w, 1 - 20.0 / w, 50.0 / h, 1 - 62.0 / h, 55.0 / w, 58.0 / h);
}

/* Close the script (after the plot commands of a single plot, or the
 * panels of a multiplot) and run gnuplot. */
static int plot_finish(FILE **gp, const char *dir, const char *name, int multi) {
  char script[PATH_MAX];
  FILE *f = *gp;
  *gp = NULL;
  if (!f) return sg_err_set(SG_EINVAL, "sg_plot_end: no script open");
  if (multi) {
    fputs("unset multiplot\n}\nunset output\n", f);
  } else {
    fprintf(f, "set terminal svg size %d,%d dynamic font 'sans,11' noenhanced\n",
            PLOT_W, PLOT_H);
    set_output(f, name, "svg");
    fputs("replot\nunset output\n", f);
  }
  SG_CHECK(sg_out_fclose(f));
  /* gnuplot opens its images by name: only absent ones or our own files */
  static const char *const images[] = {"png", "svg"};
  for (int i = 0; i < 2; i++) {
    snprintf(script, sizeof script, "%s.%s", name, images[i]);
    SG_CHECK(sg_out_check_entry(dir, script));
  }
  snprintf(script, sizeof script, "%s.gp", name);
  SG_CHECK(run_gnuplot(dir, script));
  return SG_OK;
}

int sg_plot_end(FILE **gp, const char *dir, const char *name) {
  return plot_finish(gp, dir, name, 0);
}

int sg_plot_multi_end(FILE **gp, const char *dir, const char *name) {
  return plot_finish(gp, dir, name, 1);
}
