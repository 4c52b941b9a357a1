/* outfile.h - sgdlab writes only into directories and files of its user.
 *
 * Every file sgdlab writes outside a run's private directory (report,
 * export, trace and model outputs, the results database and its -wal,
 * -shm and -journal files) goes into a directory that passes
 * sg_out_dir_open:
 *
 *   - the path is walked from "/" (a relative path after the current
 *     directory), one component at a time, each opened with
 *     O_DIRECTORY|O_NOFOLLOW relative to the one before, so what is
 *     checked is what is used;
 *   - every directory on the way is owned by root or by the user and, when
 *     its group or others may write it, sticky (as /tmp): nobody else can
 *     rename what lies below it;
 *   - a symbolic link on the way is followed only when root or the user
 *     owns it; the last component (the output directory) is never a link;
 *   - the output directory is owned by the user and writable by nobody
 *     else (not by its group, not by others); missing directories are
 *     created mode 0755 (less the umask), so one sgdlab makes always
 *     passes.
 *
 * Anything else is refused with one line that names the path and what is
 * wrong (SG_EINVAL: the commands exit 2), before anything is written.
 *
 * Files are written with sg_out_fopen: a new file with an unpredictable
 * name (O_CREAT|O_EXCL|O_NOFOLLOW) in the checked directory's descriptor,
 * renamed over NAME by sg_out_fclose (renameat: a link at NAME is replaced,
 * never followed).  An existing NAME must be a regular file of the user
 * with one link (sg_out_check_entry).
 *
 * Directories are kept open by path (the text given to sg_out_dir_open)
 * for the life of the process, so that code which passes a directory as
 * text (the report's figure writers) reaches the checked descriptor.
 */
#ifndef SG_OUTFILE_H
#define SG_OUTFILE_H

#include <stdio.h>

/* Walk, check and (create: make missing directories) open `dir`; the
 * descriptor (kept; the same one for the same text later), or a negative
 * SG_E* code with the message set (SG_EINVAL: refused). `what` begins
 * every message: the output and its path ("report directory out/"). */
int sg_out_dir_open(const char *dir, int create, const char *what);

/* Forget an opened dir (its descriptor closed) unless a file of it is
 * still open. */
void sg_out_dir_close(const char *dir);

/* The canonical path of an opened dir (no symbolic links, no . or ..);
 * NULL when `dir` was not opened. */
const char *sg_out_dir_real(const char *dir);

/* An existing entry NAME of the opened dir must be a regular file the
 * user owns with one link: 0 when it is or when there is none, else
 * SG_EINVAL with a message naming dir/name. */
int sg_out_check_entry(const char *dir, const char *name);

/* Every entry of the opened dir for which want(name) holds must be the
 * user's: the first that is not is refused (SG_EINVAL), before anything
 * is written.  (A link of the user's own is refused only where sgdlab
 * comes to write that name.) */
int sg_out_check_entries(const char *dir, int (*want)(const char *name));

/* For a file output PATH (export --out, trace --out/--html): its directory
 * (not created) and an existing PATH are checked as above.  0, or
 * SG_EINVAL / SG_ENOTFOUND with the message set. */
int sg_out_check_path(const char *path);

/* *f: a new file that becomes dir/name at sg_out_fclose (dir opened with
 * sg_out_dir_open, or opened here without creating it).  0, or a negative
 * SG_E* code with the message set (SG_EINVAL: refused), *f NULL. */
int sg_out_fopen(FILE **f, const char *dir, const char *name);
/* The same for a path "dir/name" (a bare name: the current directory). */
int sg_out_fopen_path(FILE **f, const char *path);

/* Close f (from sg_out_fopen) and rename it into place: 0, or SG_EIO /
 * SG_EINVAL with the message set; the temporary file is removed then. */
int sg_out_fclose(FILE *f);

/* Close f and remove its temporary file (an output that failed). */
void sg_out_discard(FILE *f);

/* unlinkat(dir, name) when name is a regular file of the user (an old
 * report file); 0 also when there is none, else SG_EINVAL / SG_EIO. */
int sg_out_unlink(const char *dir, const char *name);

/* The checked descriptor of an opened dir (for fchdir in a child, openat);
 * -1 when `dir` was not opened. */
int sg_out_dir_fd(const char *dir);

#endif
