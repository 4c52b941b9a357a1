/* plot.h - driving gnuplot: one script per figure, kept next to its data.
 *
 * Each figure NAME is a script NAME.gp in the output directory that reads
 * data files in the same directory and writes NAME.png (pngcairo when
 * gnuplot has it, else png) and NAME.svg, so a user can edit and redraw
 * it with `cd DIR && gnuplot NAME.gp`.  The harness runs gnuplot as a
 * child process in DIR and checks its exit status.  Text enters a script
 * only as a single-quoted string (sg_plot_quote), and every terminal and
 * text element is noenhanced, so no label is ever read as a command,
 * macro or markup.
 *
 *   FILE *gp;
 *   SG_CHECK(sg_plot_begin(&gp, dir, "acc_vs_time", "Test accuracy vs time"));
 *   sg_plot_set_text(gp, "xlabel", "...");  fputs("plot ...\n", gp);
 *   SG_CHECK(sg_plot_end(&gp, dir, "acc_vs_time"));
 *
 * The gnuplot program is $SGDLAB_GNUPLOT when set, else `gnuplot` on PATH.
 */
#ifndef SG_PLOT_H
#define SG_PLOT_H

#include <stdio.h>

/* The gnuplot program to run. */
const char *sg_plot_program(void);

/* SG_ENOTFOUND with a message saying how to get gnuplot when the program
 * cannot be found or executed. */
int sg_plot_available(void);

/* Create DIR/NAME.gp and write the common preamble (terminal, output,
 * title, grid, key outside the data).  Caller writes the plot commands
 * and must call sg_plot_end(). */
int sg_plot_begin(FILE **gp, const char *dir, const char *name,
                  const char *title);

/* sg_plot_begin for a figure of w x h pixels. */
int sg_plot_begin_size(FILE **gp, const char *dir, const char *name,
                       const char *title, int w, int h);

/* Small multiples: after sg_plot_begin_size(..., w, h), start a grid of
 * rows x cols panels under `title` (quoted).  The panels' plot commands
 * follow (each may `set title`); sg_plot_multi_end() closes the grid.
 * The panels are written once and drawn twice, PNG then SVG (gnuplot's
 * replot redraws only a multiplot's last panel). */
void sg_plot_multi_begin(FILE *gp, const char *name, int w, int h, int rows, int cols,
                         const char *title);
int sg_plot_multi_end(FILE **gp, const char *dir, const char *name);

/* Finish the script (SVG output of the same plot), close it, and run
 * gnuplot on it in DIR.  A nonzero exit is SG_EIO with gnuplot's first
 * error line.  *gp is NULL afterwards, also on error. */
int sg_plot_end(FILE **gp, const char *dir, const char *name);

/* Text in a script: every string that reaches a .gp file goes through
 * sg_plot_quote (directly or through the helpers below), whether it comes
 * from the database, the experiment file or this program.
 *
 * sg_plot_quote writes `s` as a gnuplot single-quoted string.  Inside
 * single quotes gnuplot expands nothing: no `command` substitution, no
 * @macro, no backslash escapes.  A quote is written twice (''), except
 * where gnuplot cannot read that (first in the string, right after
 * another quote): there it becomes U+2019, a typographic quote.  Newlines
 * and other control characters become spaces: a newline would end the
 * command and let the rest of the string run as the next one (`!cmd` is
 * a shell command in gnuplot). */
void sg_plot_quote(FILE *gp, const char *s);

/* A key entry or tick label: sg_plot_quote of `s`, with the middle of a
 * label longer than SG_PLOT_LABEL_MAX bytes replaced by "..." so the key
 * and the ticks keep room for the plot. */
#define SG_PLOT_LABEL_MAX 56
void sg_plot_label(FILE *gp, const char *s);

/* `s` into buf (cap bytes) with its middle replaced by "..." when longer
 * than max bytes (never inside a UTF-8 character).  Returns buf.  The
 * result is text like any other: it reaches a script only through
 * sg_plot_quote. */
const char *sg_plot_shorten(const char *s, size_t max, char *buf, size_t cap);

/* `set WHAT 'text' noenhanced` and a newline (WHAT: title, xlabel, ...). */
void sg_plot_set_text(FILE *gp, const char *what, const char *text);

/* ` title 'label' noenhanced` for one element of a plot command
 * (sg_plot_label). */
void sg_plot_title(FILE *gp, const char *text);

/* `s` into a data file the scripts read (.tsv comment lines, label
 * columns): tabs, newlines and other control characters become spaces, so
 * a label stays one field of one line.  gnuplot never runs data-file text;
 * labels drawn in a figure come from the script, never from a .tsv. */
void sg_plot_data_text(FILE *f, const char *s);

#endif
