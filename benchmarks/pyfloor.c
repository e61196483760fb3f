/*
 * The bundle's own interpreter, started bare: the libpython, standard library, loader and C
 * library of a frozen bundle, initialized as `python3 -I -S -c pass` is (isolated, no site), then
 * nothing. Run as the bundle runs it:
 *
 *     <bundle>/_internal/ld-linux-*.so.* --inhibit-cache --library-path <bundle>/_internal \
 *         pyfloor <bundle>/_internal
 *
 * so the difference between the guard's skip path and this is PyInstaller's bootloader and the
 * guard's own work, and the difference between this and Debian's python3 is the interpreter being
 * a shared library (dlopen'd by the bootloader in the bundle, linked here) instead of one static
 * executable. Built by the benchmark against the build machine's Python headers (Debian's
 * python3.11-dev, the version the bundle carries).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    PyStatus status;
    PyConfig config;
    wchar_t *home, *dynload;
    char path[4096];

    if (argc != 2) {
        fprintf(stderr, "usage: pyfloor BUNDLE/_internal\n");
        return 2;
    }
    PyConfig_InitIsolatedConfig(&config);
    config.site_import = 0;
    config.write_bytecode = 0;
    home = Py_DecodeLocale(argv[1], NULL);
    snprintf(path, sizeof path, "%s/python3.11/lib-dynload", argv[1]);
    dynload = Py_DecodeLocale(path, NULL);
    if (home == NULL || dynload == NULL) {
        return 1;
    }
    status = PyConfig_SetString(&config, &config.home, home);
    if (!PyStatus_Exception(status)) {
        status = PyWideStringList_Append(&config.module_search_paths, home);
    }
    if (!PyStatus_Exception(status)) {
        status = PyWideStringList_Append(&config.module_search_paths, dynload);
    }
    config.module_search_paths_set = 1;
    if (!PyStatus_Exception(status)) {
        status = Py_InitializeFromConfig(&config);
    }
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        Py_ExitStatusException(status);
    }
    if (PyRun_SimpleString("pass") != 0) {
        return 1;
    }
    return Py_FinalizeEx() < 0 ? 120 : 0;
}
