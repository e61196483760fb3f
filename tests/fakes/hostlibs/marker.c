/*
 * FAKE for a harmless host library (a preload that only observes, or a library in a host lib
 * dir): when it is loaded, its constructor appends "<pid> <comm>" to the file named at build time
 * (-DMARKS=...) or, when that is empty, by $DGBN_MARKS. So a test sees which processes loaded it:
 * the delegate should, the guard never. Built for this host's glibc (2.36): nothing stops it
 * loading.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MARKS
#define MARKS ""
#endif

__attribute__((constructor)) static void mark(void)
{
    const char *path = MARKS[0] ? MARKS : getenv("DGBN_MARKS");
    char comm[64] = "?";
    int fd;
    ssize_t n;

    if (path == NULL || path[0] == '\0') {
        return;
    }
    fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, comm, sizeof comm - 1);
        comm[n > 0 ? n : 0] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        close(fd);
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dprintf(fd, "%d %s\n", (int)getpid(), comm);
        close(fd);
    }
}
