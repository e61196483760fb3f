/*
 * The executable the runtime runs: starts the frozen guard with the bundle's own dynamic loader
 * and C library, whatever the host has (or lacks).
 *
 * A runtime execs a CNI plugin with the host's userland. PyInstaller's bootloader is a dynamic
 * executable whose interpreter is the host's /lib64/ld-linux-x86-64.so.2 (or the aarch64 one), and
 * the bundle's libpython needs the glibc it was built against (2.35 and later): on Amazon Linux
 * 2023, RHEL, Ubuntu 20.04 or Debian 11 it fails to load, and on a host without glibc (Talos,
 * Alpine) it does not even start. So this launcher, linked statically (it needs nothing at all
 * from the host), runs
 *
 *     <bundle>/_internal/<the bundle's ld.so> --inhibit-cache --library-path <bundle>/_internal \
 *         <bundle>/cni-delguard.frozen ARGS...
 *
 * The bundle's loader is sealed at build time (packaging/selfcontain.py): it reads no
 * /etc/ld.so.preload and searches no host lib dir, so --library-path is the only place a library
 * can come from; --inhibit-cache keeps the host's /etc/ld.so.cache out too.
 *
 * What it does before that exec, in order, each for a reason of its own:
 *
 * 1. SIGCHLD back to its default action and unblocked. Both survive exec: a runtime (or a shell,
 *    or a supervisor) that ignores SIGCHLD makes the kernel reap the guard's delegate by itself,
 *    so waiting for it fails with ECHILD; one that blocks it leaves the guard's SIGCHLD pipe
 *    (kernels without pidfd_open) silent until the delegate's timeout.
 * 2. The bundle's folder: /proc/self/exe; without /proc the path the kernel was given to exec
 *    (getauxval(AT_EXECFN): a runtime's full path, a PATH search's result, a relative path, a
 *    symlink), resolved; argv[0] only as the last resort (a caller may pass any argv[0]).
 * 3. The variables the loader would act on for the guard, moved aside (LD_PRELOAD, LD_AUDIT: a
 *    host's preload built for a newer glibc stops the bundle's 2.36 loader), and LC_ALL set to
 *    C, the one locale glibc has built in without looking for files first (C.UTF-8 it looks up
 *    in the host's locale dirs and gconv cache): no host locale file or gconv module is read, and
 *    the guard runs as on a node without LANG. Each is recorded in _DELGUARD_RESTORE and, when
 *    the runtime had set it, in _DELGUARD_ORIG_<NAME>; the bundle's runtime hook
 *    (packaging/rthooks/pyi_rth_delguard_env.py) puts every one back as the runtime gave it
 *    before any of the guard's code runs, so the delegate gets exactly the runtime's
 *    environment, LD_PRELOAD included.
 * 4. Three of the bootloader's own variables: _PYI_ARCHIVE_FILE=<bundle>/cni-delguard.frozen,
 *    _PYI_PARENT_PROCESS_LEVEL=-1 and _PYI_LINUX_PROCESS_NAME=cni-delguard. They tell
 *    PyInstaller's one-folder bootloader (6.x, bootloader/src/pyi_main.c) that it is already the
 *    restarted process, so it does not set LD_LIBRARY_PATH and exec itself a second time, and it
 *    names the process (comm) cni-delguard, whatever name the runtime exec'd it by (from the
 *    exec of the loader until then, comm is the loader's file name: README.md, "Where it runs").
 *    The runtime hook removes them again.
 * 5. For a CNI call (CNI_COMMAND set), a sentinel: a forked child that holds the runtime's stdout
 *    and stderr, and two pipes. The guard's stderr goes through one of them until its runtime
 *    hook runs, which puts the runtime's stderr back and writes one byte into the other: the
 *    guard's own code is about to run, and from there on every failure is the guard's own CNI
 *    error. When the guard dies before that byte (the loader cannot load a library, libpython or
 *    the standard library is missing, Python cannot start), the sentinel sees EOF instead and
 *    prints the CNI error on stdout, with what the guard said on stderr as its details (the
 *    runtime reads stdout until EOF, so it gets this line with the guard's non-zero exit).
 *    A fork costs 0.1 ms here (packaging/README.md); when it fails, the guard runs without one.
 *
 * When this launcher itself cannot start the guard, it prints the CNI error (code 999) on stdout,
 * the same line on stderr, and exits 1. It decides nothing about CNI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#ifndef DELGUARD_LOADER
#error "build with -DDELGUARD_LOADER='\"ld-linux-<arch>.so.N\"' (packaging/selfcontain.py does)"
#endif

#define PROGRAM "cni-delguard.frozen"
#define LIBDIR "_internal"
#define NAME "cni-delguard"
/* The runtime hook's names (packaging/rthooks/pyi_rth_delguard_env.py): keep them in step. */
#define RESTORE_VAR "_DELGUARD_RESTORE"
#define ORIG_PREFIX "_DELGUARD_ORIG_"
#define START_VAR "_DELGUARD_START"
/* What the guard said on stderr before it died, kept for the CNI error's details. */
#define DETAILS_MAX 2048

extern char **environ;

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void put_json_string(FILE *out, const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
}

static void cni_error(const char *msg, const char *details, size_t n)
{
    fputs("{\"cniVersion\":\"1.0.0\",\"code\":999,\"msg\":\"", stdout);
    put_json_string(stdout, msg, strlen(msg));
    fputs("\",\"details\":\"", stdout);
    put_json_string(stdout, details, n);
    fputs("\"}\n", stdout);
    fflush(stdout);
}

static int fail(const char *what, const char *path, int err)
{
    char details[PATH_MAX + 256];
    char msg[256];
    snprintf(msg, sizeof msg, "cni-delguard cannot start: %s", what);
    snprintf(details, sizeof details, "%s: %s", path, strerror(err));
    cni_error(msg, details, strlen(details));
    fprintf(stderr, "%s: %s\n", msg, details);
    return 1;
}

/* 1. SIGCHLD as a fresh process has it, whatever the runtime left: default action, unblocked. */
static void reset_sigchld(void)
{
    sigset_t chld;
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
}

/* `path`'s directory into `dir`, symlinks resolved; -1 when it cannot be resolved. */
static int dir_of(const char *path, char *dir)
{
    char self[PATH_MAX];
    char *slash;

    if (path == NULL || realpath(path, self) == NULL) {
        return -1;
    }
    slash = strrchr(self, '/');
    if (slash == NULL) {
        errno = ENOENT;
        return -1;
    }
    *slash = '\0';
    strcpy(dir, self[0] ? self : "/");
    return 0;
}

/* 2. The bundle's directory: where this launcher really is. */
static int bundle_dir(const char *argv0, char *dir)
{
    const char *execfn = (const char *)getauxval(AT_EXECFN);

    if (dir_of("/proc/self/exe", dir) == 0) {
        return 0;
    }
    if (execfn != NULL && dir_of(execfn, dir) == 0) {
        return 0;
    }
    if (argv0 == NULL || strchr(argv0, '/') == NULL) {
        errno = ENOENT; /* a bare argv[0] names a file in the cwd only by accident */
        return -1;
    }
    return dir_of(argv0, dir);
}

static int join(char *out, const char *dir, const char *name)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* 3. Set `name` to `value` (NULL: unset it) for the loader and the bootloader, recording the
 * runtime's own value for the runtime hook to put back. */
static int set_aside(const char *name, const char *value, char *restore, size_t size)
{
    char orig[64];
    const char *had = getenv(name);

    if (had != NULL) {
        snprintf(orig, sizeof orig, ORIG_PREFIX "%s", name);
        if (setenv(orig, had, 1) < 0) {
            return -1;
        }
    }
    if ((value ? setenv(name, value, 1) : unsetenv(name)) < 0) {
        return -1;
    }
    if (strlen(restore) + strlen(name) + 2 > size) {
        errno = E2BIG;
        return -1;
    }
    if (restore[0]) {
        strcat(restore, ",");
    }
    strcat(restore, name);
    return 0;
}

/* The sentinel's loop: forward the guard's early stderr, keep its tail, and wait for the start
 * byte or EOF. Runs in the child, exits there. */
static void sentinel(int start, int err)
{
    char tail[DETAILS_MAX];
    char buf[4096];
    size_t kept = 0;
    int started = -1; /* -1: not yet known, 0: EOF (died first), 1: the byte came */
    struct pollfd fds[2] = {{start, POLLIN, 0}, {err, POLLIN, 0}};

    while (started < 0 || fds[1].fd >= 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            _exit(0);
        }
        if (fds[0].fd >= 0 && fds[0].revents) {
            char byte;
            ssize_t n = read(start, &byte, 1);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            started = n == 1;
            fds[0].fd = -1;
        }
        if (fds[1].fd >= 0 && fds[1].revents) {
            ssize_t n = read(err, buf, sizeof buf);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                fds[1].fd = -1;
                continue;
            }
            if (write(2, buf, (size_t)n) < 0) {
                /* the runtime's stderr is gone: the tail below is what is left */
            }
            if ((size_t)n >= sizeof tail) {
                memcpy(tail, buf + n - sizeof tail, sizeof tail);
                kept = sizeof tail;
            } else {
                if (kept + (size_t)n > sizeof tail) {
                    size_t drop = kept + (size_t)n - sizeof tail;
                    memmove(tail, tail + drop, kept - drop);
                    kept -= drop;
                }
                memcpy(tail + kept, buf, (size_t)n);
                kept += (size_t)n;
            }
        }
    }
    if (!started) {
        while (kept > 0 && (tail[kept - 1] == '\n' || tail[kept - 1] == '\r')) {
            kept--;
        }
        static const char nothing[] = "it printed nothing on stderr";
        cni_error("cni-delguard failed before its own code ran (the bundle's loader, a library "
                  "or Python could not start)",
                  kept ? tail : nothing, kept ? kept : sizeof nothing - 1);
    }
    _exit(0);
}

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* 5. Start the sentinel; on success the guard's stderr is the sentinel's pipe and START_VAR says
 * where the start byte and the runtime's stderr are. Any failure: the guard runs without it. */
static void start_sentinel(void)
{
    int start[2], err[2], saved;
    char value[32];
    pid_t pid;

    if (!is_open(0) || !is_open(1) || !is_open(2)) {
        return; /* a pipe could take the number of a closed standard stream */
    }
    if (pipe2(start, O_CLOEXEC) < 0) {
        return;
    }
    if (pipe2(err, O_CLOEXEC) < 0) {
        close(start[0]);
        close(start[1]);
        return;
    }
    saved = fcntl(2, F_DUPFD, 3); /* the runtime's stderr, inherited across exec */
    pid = saved < 0 ? -1 : fork();
    if (pid == 0) {
        close(start[1]);
        close(err[1]);
        close(saved);
        sentinel(start[0], err[0]);
    }
    close(start[0]);
    close(err[0]);
    snprintf(value, sizeof value, "%d,%d", start[1], saved);
    if (pid < 0 || dup2(err[1], 2) < 0 || fcntl(start[1], F_SETFD, 0) < 0 ||
        setenv(START_VAR, value, 1) < 0) {
        if (saved >= 0) {
            dup2(saved, 2);
            close(saved);
        }
        if (pid > 0 && write(start[1], "x", 1) < 0) {
            /* the sentinel is gone already */
        }
        close(start[1]);
        close(err[1]);
        unsetenv(START_VAR);
        return;
    }
    close(err[1]);
}

/* The sentinel must not speak for a failure this launcher reports itself. */
static void dismiss_sentinel(void)
{
    const char *value = getenv(START_VAR);
    int start, saved;

    if (value != NULL && sscanf(value, "%d,%d", &start, &saved) == 2) {
        dup2(saved, 2);
        if (write(start, "x", 1) < 0) {
            /* the sentinel is gone already */
        }
        close(start);
        close(saved);
    }
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX], loader[PATH_MAX], libdir[PATH_MAX], program[PATH_MAX];
    char restore[128] = "";
    char **args;
    int i, n = 0;

    reset_sigchld();
    if (bundle_dir(argv[0], dir) < 0) {
        return fail("cannot find its own folder", argv[0] ? argv[0] : "(no argv[0])", errno);
    }
    if (join(loader, dir, LIBDIR "/" DELGUARD_LOADER) < 0 || join(libdir, dir, LIBDIR) < 0 ||
        join(program, dir, PROGRAM) < 0) {
        return fail("its folder's path is too long", dir, errno);
    }
    if (set_aside("LD_PRELOAD", NULL, restore, sizeof restore) < 0 ||
        set_aside("LD_AUDIT", NULL, restore, sizeof restore) < 0 ||
        set_aside("LC_ALL", "C", restore, sizeof restore) < 0 ||
        setenv(RESTORE_VAR, restore, 1) < 0 || setenv("_PYI_ARCHIVE_FILE", program, 1) < 0 ||
        setenv("_PYI_PARENT_PROCESS_LEVEL", "-1", 1) < 0 ||
        setenv("_PYI_LINUX_PROCESS_NAME", NAME, 1) < 0) {
        return fail("cannot set its environment", program, errno);
    }
    args = calloc((size_t)argc + 6, sizeof(char *));
    if (args == NULL) {
        return fail("out of memory", program, ENOMEM);
    }
    args[n++] = loader;
    args[n++] = "--inhibit-cache";
    args[n++] = "--library-path";
    args[n++] = libdir;
    args[n++] = program;
    for (i = 1; i < argc; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;
    if (getenv("CNI_COMMAND") != NULL) {
        start_sentinel();
    }
    execve(loader, args, environ);
    i = errno;
    dismiss_sentinel();
    return fail("cannot run the bundle's loader", loader, i);
}
