/* plot.h - driving gnuplot: one script per figure, kept next to its data.
 *
 * Each figure NAME is a script NAME.gp in the output directory that reads
 * data files in the same directory and writes NAME.png (pngcairo when
 * gnuplot has it, else png) and NAME.svg, so a user can edit and redraw
 * it with `cd DIR && gnuplot NAME.gp` (STYLE.md 11).  The harness runs
 * gnuplot as a child process in DIR and checks its exit status.
 *
 *   FILE *gp;
 *   SG_CHECK(sg_plot_begin(&gp, dir, "acc_vs_time", "Test accuracy vs time"));
 *   fprintf(gp, "set xlabel ...\nplot ...\n");
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

/* Finish the script (SVG output of the same plot), close it, and run
 * gnuplot on it in DIR.  A nonzero exit is SG_EIO with gnuplot's first
 * error line.  *gp is NULL afterwards, also on error. */
int sg_plot_end(FILE **gp, const char *dir, const char *name);

/* Write `s` as a gnuplot double-quoted string (quotes and backslashes
 * escaped). */
void sg_plot_quote(FILE *gp, const char *s);

#endif
