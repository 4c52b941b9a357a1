/* trusted_path.h - directories that no one but root and the user can
 * change, reached without trusting anything else on the way.
 *
 * sg_trusted_dir_walk opens a directory from "/" one component at a time,
 * each entered with O_DIRECTORY | O_NOFOLLOW relative to the one before
 * and checked on its descriptor (so what is checked is what is used):
 * owned by root, the user or `also`, and writable by no one else unless
 * sticky (/tmp: others cannot rename or remove what is not theirs).  A
 * symbolic link on the way is followed only when root, the user or `also`
 * owns it (its owner could repoint it), its target spliced into the rest
 * of the path; ".." goes to the real parent, as realpath would.  Used for
 * the data cache's directory (dataset_cache.c) and munged's socket
 * (stage_munge.c).
 */
#ifndef SG_TRUSTED_PATH_H
#define SG_TRUSTED_PATH_H

#include <sys/types.h>

/* No uid besides root and the user. */
#define SG_TRUSTED_NO_UID ((uid_t)-1)

/* Walk and check the directory `abs` (an absolute path) as above; the
 * descriptor, or a negative SG_E* code (SG_EIO) with one line that begins
 * with `what` and names the component and why. */
int sg_trusted_dir_walk(const char *abs, const char *what, uid_t also);

#endif
