/* FAKE, link time only: stands for glibc 2.38's libc.so.6 where newer_glibc.c's one symbol is
 * defined (see newer_glibc.c). Never loaded. */
long __isoc23_strtol(const char *text, char **end, int base)
{
    (void)text;
    (void)end;
    (void)base;
    return 0;
}
