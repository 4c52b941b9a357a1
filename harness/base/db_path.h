/* db_path.h - where the results database is when a command is given no
 * --db: relative to the current directory; $SGDLAB_DB, when set, replaces
 * it for every command that takes --db (cli/main.c). */
#ifndef SG_DB_PATH_H
#define SG_DB_PATH_H

#define SG_DEFAULT_DB "results/sgdlab.db"

#endif
