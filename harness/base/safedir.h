/* safedir.h - directories of the user's, opened and removed through
 * descriptors, never by path.
 *
 * A directory is opened with O_NOFOLLOW | O_DIRECTORY and checked
 * (fstat: the user's, on the same file system), and emptied with unlinkat
 * relative to that descriptor; a symlink is unlinked itself, never
 * followed; a subdirectory that is not the user's, or is another file
 * system, is refused (left, with an error).  Used for the run's directory
 * (run/rundir.h) and by sgdlab-nsexec for a cluster host's directory in it.
 */
#ifndef SG_SAFEDIR_H
#define SG_SAFEDIR_H

/* Open `name` under `at` (AT_FDCWD: a path) as a directory without
 * following a symlink, and check it: the user's, no permission for group
 * or others.  The descriptor, or a negative SG_E* code (message set). */
int sg_dir_open_private(int at, const char *name);

/* Remove everything in the directory open as dfd (above: never follows a
 * link, never re-resolves a path; subdirectories not the user's or on
 * another file system are refused).  The directory itself stays.  SG_OK,
 * or the first error. */
int sg_rmtree_fd(int dfd);

/* sg_dir_open_private(at, name), empty it, then remove it from at.  A
 * missing name is SG_OK. */
int sg_rmtree_at(int at, const char *name);

#endif
