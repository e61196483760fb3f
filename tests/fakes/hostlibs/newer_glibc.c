/*
 * FAKE for a host preload library built on a newer glibc (an EDR or APM agent compiled on Debian
 * trixie or Ubuntu 24.04): it calls __isoc23_strtol, C23's strtol that glibc 2.38 added and
 * that every such build calls for strtol, so its loader must find the version GLIBC_2.38.
 *
 * How the version need is produced: tests/support/hostlibs.py links this file against
 * stub_libc.c, a link-time stand-in for libc.so.6 that defines __isoc23_strtol at version
 * GLIBC_2.38 (stub_libc.map), so the result carries the same VERNEED entry (libc.so.6,
 * GLIBC_2.38) as a library compiled against glibc 2.38 or later. The stub is never loaded: at run
 * time the library meets a real glibc 2.36 (the bundle's or this host's), which refuses it with
 * "version `GLIBC_2.38' not found", as it refuses the real ones.
 */
long __isoc23_strtol(const char *text, char **end, int base);

__attribute__((constructor)) static void hook(void)
{
    (void)__isoc23_strtol("1", 0, 10);
}
