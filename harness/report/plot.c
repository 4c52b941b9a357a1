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

void sg_plot_label(FILE *gp, const char *s) {
  char buf[SG_PLOT_LABEL_MAX + 8];
  size_t len = strlen(s), head = SG_PLOT_LABEL_MAX / 2, tail;
  if (len <= SG_PLOT_LABEL_MAX) {
    sg_plot_quote(gp, s);
    return;
  }
  /* head ... tail: the ends tell variants apart (engine first, swept
   * settings and N last) */
  while (head > 0 && utf8_cont(s + head)) head--;
  tail = len - (SG_PLOT_LABEL_MAX - 3 - SG_PLOT_LABEL_MAX / 2);
  while (tail < len && utf8_cont(s + tail)) tail++;
  snprintf(buf, sizeof buf, "%.*s...%s", (int)head, s, s + tail);
  sg_plot_quote(gp, buf);
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
  char path[PATH_MAX];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s.gp", dir, name);
  *gp = NULL;
  f = fopen(path, "w");
  if (!f)
    return sg_err_set(SG_EIO, "cannot write %s: %s", path, strerror(errno));
  /* Constant strings below are single-quoted like all text (plot.h). */
  fprintf(f,
          "# %s.gp - written by `sgdlab report` from the results database.\n"
          "# Redraw with: gnuplot %s.gp (in this directory).\n"
          "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "  set terminal pngcairo size %d,%d font 'sans,11' noenhanced\n"
          "} else {\n"
          "  set terminal png size %d,%d noenhanced\n"
          "}\n",
          name, name, PLOT_W, PLOT_H, PLOT_W, PLOT_H);
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

/* Run gnuplot on `script` with cwd `dir`; stderr (where gnuplot reports)
 * is collected to quote its first line on failure. */
static int run_gnuplot(const char *dir, const char *script) {
  int pipefd[2], status = 0;
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
    if (chdir(dir) != 0) _exit(126);
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

int sg_plot_end(FILE **gp, const char *dir, const char *name) {
  char script[PATH_MAX];
  FILE *f = *gp;
  int bad;
  *gp = NULL;
  if (!f) return sg_err_set(SG_EINVAL, "sg_plot_end: no script open");
  fprintf(f, "set terminal svg size %d,%d dynamic font 'sans,11' noenhanced\n",
          PLOT_W, PLOT_H);
  set_output(f, name, "svg");
  fputs("replot\nunset output\n", f);
  bad = ferror(f);
  if (fclose(f) != 0 || bad)
    return sg_err_set(SG_EIO, "cannot write %s/%s.gp", dir, name);
  snprintf(script, sizeof script, "%s.gp", name);
  SG_CHECK(run_gnuplot(dir, script));
  return SG_OK;
}
