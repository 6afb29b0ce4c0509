/* A file layer that forgets every write not yet synced: LD_PRELOAD it into a process whose
 * SQLite files live under $POWERLOSS_DIR. Each fsync/fdatasync of such a file first copies
 * the whole file to "<file>.synced" (tmp + rename, so a kill mid-copy keeps the previous
 * copy). After a SIGKILL, bench/torture.py "loses power": every file is replaced by its
 * .synced copy (deleted if it never had one) and -shm files go — exactly the state a disk
 * that threw away all unsynced writes would hold. Built by bench/torture.py with cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static void keep_synced(int fd) {
    const char *dir = getenv("POWERLOSS_DIR");
    if (!dir || !*dir) return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    size_t dl = strlen(dir);
    if (strncmp(path, dir, dl) != 0 || path[dl] != '/') return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (strstr(path, ".synced") || strstr(path, "-shm")) return;
    char tmp[PATH_MAX + 16], dst[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.synced.tmp", path);
    snprintf(dst, sizeof dst, "%s.synced", path);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0) return;
    char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t r = pread(fd, buf, sizeof buf, off);
        if (r <= 0) break;
        if (write(out, buf, (size_t)r) != r) break;
        off += r;
    }
    close(out);
    rename(tmp, dst);
}

/* Only this process loses power: its children (the shell tool's commands) do not inherit the
 * layer, and Python never sees the variable. */
__attribute__((constructor)) static void forget_preload(void) { unsetenv("LD_PRELOAD"); }

int fsync(int fd) {
    if (!real_fsync) real_fsync = dlsym(RTLD_NEXT, "fsync");
    keep_synced(fd);
    return real_fsync(fd);
}

int fdatasync(int fd) {
    if (!real_fdatasync) real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    keep_synced(fd);
    return real_fdatasync(fd);
}
