// files.c — folders made as needed (files.h).
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"

int make_dirs(const char *dir) {
    char p[4096];
    if (!dir[0]) return errno = ENOENT, -1;
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return errno = ENAMETOOLONG, -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(p, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return errno = ENOTDIR, -1;
    return access(p, W_OK | X_OK);
}
