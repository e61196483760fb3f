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
 * with the environment it was given, plus three of the bootloader's own variables:
 *   _PYI_ARCHIVE_FILE=<bundle>/cni-delguard.frozen, _PYI_PARENT_PROCESS_LEVEL=-1 and
 *   _PYI_LINUX_PROCESS_NAME=<our process name>.
 * They tell PyInstaller's one-folder bootloader (6.x, bootloader/src/pyi_main.c) that it is
 * already the restarted process, so it does not set LD_LIBRARY_PATH and exec itself a second time:
 * the loader's --library-path already points every library lookup of this process (the
 * bootloader's, libpython's, every extension module's dlopen) at _internal, without an
 * environment variable that a delegate would inherit. --inhibit-cache keeps the host's
 * /etc/ld.so.cache out of the lookups. The frozen program's runtime hook
 * (packaging/rthooks/pyi_rth_delguard_env.py) removes the _PYI_* variables again before any of
 * the guard's code runs, so the delegate gets exactly the runtime's environment.
 *
 * The bundle is found from /proc/self/exe, or from argv[0] where /proc is not mounted (a runtime
 * always execs a plugin by its path). This launcher decides nothing about CNI: when it cannot
 * start the guard, it prints a CNI error (code 999) on stdout, the same line on stderr, and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef DELGUARD_LOADER
#error "build with -DDELGUARD_LOADER='\"ld-linux-<arch>.so.N\"' (packaging/selfcontain.py does)"
#endif

#define PROGRAM "cni-delguard.frozen"
#define LIBDIR "_internal"

extern char **environ;

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void put_json_string(FILE *out, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
}

static int fail(const char *what, const char *path, int err)
{
    fputs("{\"cniVersion\":\"1.0.0\",\"code\":999,\"msg\":\"cni-delguard cannot start: ", stdout);
    put_json_string(stdout, what);
    fputs("\",\"details\":\"", stdout);
    put_json_string(stdout, path);
    fputs(": ", stdout);
    put_json_string(stdout, strerror(err));
    fputs("\"}\n", stdout);
    fflush(stdout);
    fprintf(stderr, "cni-delguard cannot start: %s: %s: %s\n", what, path, strerror(err));
    return 1;
}

/* The bundle's directory: where this launcher really is, symlinks resolved. */
static int bundle_dir(const char *argv0, char *dir)
{
    char self[PATH_MAX];
    char *slash;

    if (realpath("/proc/self/exe", self) == NULL) {
        if (argv0 == NULL || strchr(argv0, '/') == NULL) {
            errno = ENOENT;
            return -1;
        }
        if (realpath(argv0, self) == NULL) {
            return -1;
        }
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

static int join(char *out, const char *dir, const char *name)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX], loader[PATH_MAX], libdir[PATH_MAX], program[PATH_MAX];
    char name[17] = "cni-delguard";
    char **args;
    int i, n = 0;

    (void)argc;
    if (bundle_dir(argv[0], dir) < 0) {
        return fail("cannot find its own folder", argv[0] ? argv[0] : "(no argv[0])", errno);
    }
    if (join(loader, dir, LIBDIR "/" DELGUARD_LOADER) < 0 || join(libdir, dir, LIBDIR) < 0 ||
        join(program, dir, PROGRAM) < 0) {
        return fail("its folder's path is too long", dir, errno);
    }
    prctl(PR_GET_NAME, name, 0, 0, 0); /* the name the runtime exec'd us by; kept on failure */
    if (setenv("_PYI_ARCHIVE_FILE", program, 1) < 0 ||
        setenv("_PYI_PARENT_PROCESS_LEVEL", "-1", 1) < 0 ||
        setenv("_PYI_LINUX_PROCESS_NAME", name, 1) < 0) {
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
    execve(loader, args, environ);
    return fail("cannot run the bundle's loader", loader, errno);
}
