// glibc's allocator tunables (mallopt), for the executable's start.
#include <malloc.h>
