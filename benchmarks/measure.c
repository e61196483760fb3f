/* measure PROGRAM ARGS...: fork, exec PROGRAM, wait4; write to fd 3
 * "<wall ns> <maxrss KiB> <exit code> <user+system CPU us>".
 *
 * Why not os.wait4 from the Python harness directly: a process's ru_maxrss starts at the high-water
 * mark of the memory it had before exec, and a child forked (or vforked) from a 15 MiB Python
 * process reports at least 15 MiB whatever it runs. Forked from this small static program, the
 * child starts from a few hundred KiB. Compiled at benchmark time with gcc -static. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct timespec start, end;
    struct rusage usage;
    int status;
    pid_t pid;

    if (argc < 2)
        return 2;
    fcntl(3, F_SETFD, FD_CLOEXEC);
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    if (pid < 0 || wait4(pid, &status, 0, &usage) < 0)
        return 2;
    clock_gettime(CLOCK_MONOTONIC, &end);
    dprintf(3, "%lld %ld %d %ld\n",
            (long long)(end.tv_sec - start.tv_sec) * 1000000000LL + (end.tv_nsec - start.tv_nsec),
            usage.ru_maxrss,
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
            (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000L + usage.ru_utime.tv_usec +
                usage.ru_stime.tv_usec);
    return 0;
}
