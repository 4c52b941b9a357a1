/* commands.h - the sgdlab subcommands, one file each; main.c dispatches.
 *
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit code: 0 ok, 1 failure (a run
 * failed, a query found nothing), 2 usage or configuration error.
 */
#ifndef SG_COMMANDS_H
#define SG_COMMANDS_H

int sg_cmd_run(int argc, char **argv);     /* run/command.c */
int sg_cmd_bench(int argc, char **argv);   /* bench.c */
int sg_cmd_report(int argc, char **argv);  /* report.c */
int sg_cmd_list(int argc, char **argv);    /* show.c */
int sg_cmd_show(int argc, char **argv);    /* show.c */
int sg_cmd_trace(int argc, char **argv);   /* trace.c */
int sg_cmd_export(int argc, char **argv);  /* export.c */
int sg_cmd_engines(int argc, char **argv); /* main.c */
int sg_cmd_help(int argc, char **argv);    /* main.c: help config */

/* Default database path, relative to the current directory; $SGDLAB_DB,
 * when set, replaces it for every command that takes --db (main.c). */
#define SG_DEFAULT_DB "results/sgdlab.db"

#endif
