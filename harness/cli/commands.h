/* commands.h - the sgdlab subcommands that live in the CLI itself; the
 * others are declared by their library (run.h, report.h, cluster.h);
 * main.c dispatches.
 *
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit code: 0 ok, 1 failure (a run
 * failed, a query found nothing), 2 usage or configuration error.
 */
#ifndef SG_COMMANDS_H
#define SG_COMMANDS_H

int sg_cmd_bench(int argc, char **argv);   /* bench.c */
int sg_cmd_engines(int argc, char **argv); /* main.c */
int sg_cmd_help(int argc, char **argv);    /* main.c: help config */
int sg_cmd_claims(int argc, char **argv);  /* claims.c */
int sg_cmd_lab(int argc, char **argv);     /* lab.c: lab check */

#include "db_path.h"

#endif
