/* LD_PRELOAD shim for the tests: getaddrinfo answers the names listed in
 * the file $LUXD_FAKE_HOSTS ("name addr [addr...]" per line) with those
 * numeric addresses, in that order, and asks the real resolver for any
 * other name. The tests of name resolution then do not depend on what
 * the machine's /etc/hosts says (a minimal root may not even have
 * localhost in it). Built by the test that uses it; never part of luxd. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char *path = getenv("LUXD_FAKE_HOSTS");
    FILE *f = node && path ? fopen(path, "r") : NULL;
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        char *save, *name = strtok_r(line, " \t\n", &save);
        if (name == NULL || strcasecmp(name, node) != 0) continue;
        fclose(f);
        struct addrinfo h = hints ? *hints : (struct addrinfo){0}, *head = NULL, **tail = &head;
        h.ai_flags |= AI_NUMERICHOST;
        for (char *a = strtok_r(NULL, " \t\n", &save); a; a = strtok_r(NULL, " \t\n", &save)) {
            struct addrinfo *one;
            if (real(a, service, &h, &one) != 0) continue; /* a family the hints exclude */
            *tail = one;
            while (*tail)
                tail = &(*tail)->ai_next;
        }
        if (head == NULL) return EAI_NONAME;
        *res = head;
        return 0;
    }
    if (f) fclose(f);
    return real(node, service, hints, res);
}
