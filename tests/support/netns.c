/*
 * netns.c — the tests' network namespace and veth pair (netns.h), made with the ip command.
 */
#include "netns.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int mc_sh(const char *fmt, ...)
{
    char cmd[1024], full[1100];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}

void mc_netns_destroy(mc_netns_t *n)
{
    if (!n->created)
        return;
    n->created = 0;
    mc_sh("%s netns del %s", n->ip_bin, n->ns); /* takes its veth end, and so the pair, along */
    mc_sh("%s link del %s", n->ip_bin, n->veth_root);
}

/* The third octet of a /24 of 10.<net>.0.0/16 that no interface here has an address in, or -1.
 * The search starts at a place of the pid's, so tests side by side rarely try the same one. */
static int free_subnet(const char *ip_bin, int net, int pid)
{
    for (int k = 0; k < 250; k++) {
        int cand = 1 + (pid + k) % 250;
        char cmd[160], line[256];
        snprintf(cmd, sizeof(cmd), "%s -o -4 addr show to 10.%d.%d.0/24", ip_bin, net, cand);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        int used = fgets(line, sizeof(line), f) != NULL;
        pclose(f);
        if (!used)
            return cand;
    }
    return -1;
}

const char *mc_netns_create(mc_netns_t *n, const char *tag, int net)
{
    memset(n, 0, sizeof(*n));
    const char *cands[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]) && !n->ip_bin[0]; i++)
        if (access(cands[i], X_OK) == 0)
            snprintf(n->ip_bin, sizeof(n->ip_bin), "%s", cands[i]);
    if (!n->ip_bin[0])
        return "the ip command (iproute2) is not installed";
    if (geteuid() != 0)
        return "not root: network namespaces need CAP_NET_ADMIN";
    if (strlen(tag) > 5)
        return "a namespace tag longer than 5 characters (interface names have 15)";
    int pid = (int)getpid();
    snprintf(n->ns, sizeof(n->ns), "%s%d", tag, pid);
    snprintf(n->veth_root, sizeof(n->veth_root), "%sr%d", tag, pid % 100000);
    snprintf(n->veth_ns, sizeof(n->veth_ns), "%sn%d", tag, pid % 100000);
    n->subnet = free_subnet(n->ip_bin, net, pid);
    if (n->subnet < 0)
        return "no free /24 in the test's 10.x.0.0/16";
    snprintf(n->root_ip, sizeof(n->root_ip), "10.%d.%d.1", net, n->subnet);
    snprintf(n->ns_ip, sizeof(n->ns_ip), "10.%d.%d.2", net, n->subnet);
    if (mc_sh("%s netns add %s", n->ip_bin, n->ns) != 0)
        return "cannot create a network namespace (`ip netns add` failed: needs CAP_NET_ADMIN)";
    n->created = 1;
    const char *I = n->ip_bin;
    if (mc_sh("%s link add %s type veth peer name %s", I, n->veth_root, n->veth_ns) ||
        mc_sh("%s link set %s netns %s", I, n->veth_ns, n->ns) ||
        mc_sh("%s addr add %s/24 dev %s", I, n->root_ip, n->veth_root) ||
        mc_sh("%s link set %s up", I, n->veth_root) ||
        mc_sh("%s -n %s addr add %s/24 dev %s", I, n->ns, n->ns_ip, n->veth_ns) ||
        mc_sh("%s -n %s link set lo up", I, n->ns) ||
        mc_sh("%s -n %s link set %s up", I, n->ns, n->veth_ns)) {
        mc_netns_destroy(n);
        return "cannot set up a veth pair between the namespaces";
    }
    return NULL;
}

int mc_netns_link_set(const mc_netns_t *n, int up)
{
    return mc_sh("%s -n %s link set %s %s", n->ip_bin, n->ns, n->veth_ns, up ? "up" : "down");
}
