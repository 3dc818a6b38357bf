// files.h — what the file system gives every program: folders made as needed.
#pragma once

// mkdir -p: dir and the folders above it, made where missing; then is dir a folder
// this process may write into? 0, or -1 with errno (ENOTDIR: a file of that name).
int make_dirs(const char *dir);
