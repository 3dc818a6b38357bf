// launch_nodes.c — the built-in launcher's nodes (--nodes N): which ranks share a
// node, the network namespace each node's ranks run in (--cluster, made by
// scripts/cluster.sh), and where the TCP mesh between nodes meets (MASTER_ADDR and
// MASTER_PORT, as torchrun's ranks would be told).
//
// Without --cluster the nodes are only a partition of this machine's ranks: shared
// memory inside each, TCP over the loopback across them. With it, node i's ranks
// enter the namespace CLUSTER-node<i>, whose one link to the others is shaped to
// the cluster's rate: every byte between nodes crosses it, as on a real cluster.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "comm_internal.h"

static void ns_path(const LaunchNodes *ln, int node, char *buf, size_t n) {
    snprintf(buf, n, "/run/netns/%s-node%d", ln->cluster, node);
}

// Moves this process into node `node`'s namespace (a child, before it talks).
void launch_nodes_enter(const LaunchNodes *ln, int node) {
    if (!ln->cluster) return;
    char path[256];
    ns_path(ln, node, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "--cluster %s: cannot open %s: %s", ln->cluster, path, strerror(errno));
    CHECK(setns(fd, CLONE_NEWNET) == 0, "--cluster %s: cannot enter %s: %s (it needs root)",
          ln->cluster, path, strerror(errno));
    close(fd);
}

// The first IPv4 address of this namespace that is not the loopback's.
static int node_address(char *buf, size_t n) {
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) return -1;
    int found = -1;
    for (struct ifaddrs *a = all; a && found < 0; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && !(a->ifa_flags & IFF_LOOPBACK) &&
            (a->ifa_flags & IFF_UP)) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)a->ifa_addr;
            found = inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)n) ? 0 : -1;
        }
    freeifaddrs(all);
    return found;
}

// A port nobody listens on now (the kernel's pick). Another process could take it
// before rank 0 listens there; in a namespace of our own nobody else does.
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
          getsockname(fd, (struct sockaddr *)&a, &len) == 0, "cannot find a free port: %s",
          strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

// A node's address and a free port there: from inside its namespace, and back.
static void master_in(const LaunchNodes *ln, int node, char *addr, size_t n, int *port) {
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    CHECK(home >= 0, "cannot open this process's network namespace: %s", strerror(errno));
    launch_nodes_enter(ln, node);
    int ok = node_address(addr, n);
    *port = free_port();
    CHECK(setns(home, CLONE_NEWNET) == 0, "cannot return to the launcher's network namespace: %s",
          strerror(errno));
    close(home);
    CHECK(ok == 0, "--cluster %s: node %d's namespace has no IPv4 address but the loopback's "
          "(is scripts/cluster.sh's set-up complete?)", ln->cluster, node);
}

void launch_nodes_plan(LaunchNodes *ln, int nodes, const char *cluster, int np) {
    ln->nodes = nodes;
    ln->cluster = cluster;
    CHECK(nodes >= 1 && np % nodes == 0, "--nodes %d does not divide the %d "
          "ranks (--np): every node holds the same number of ranks", nodes, np);
    ln->node_size = np / nodes;
    for (int i = 0; ln->cluster && i < ln->nodes; i++) {  // all there, before any rank starts
        char path[256];
        ns_path(ln, i, path, sizeof path);
        CHECK(access(path, R_OK) == 0, "--cluster %s --nodes %d: no namespace %s (%s); make the "
              "cluster first: bash scripts/cluster.sh up --nodes %d", ln->cluster, ln->nodes, path,
              strerror(errno), ln->nodes);
    }
}

void launch_nodes_master(const LaunchNodes *ln, int node) {
    char addr[64] = "127.0.0.1", port_s[16];
    int port;
    if (ln->cluster) master_in(ln, node, addr, sizeof addr, &port);
    else port = free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    setenv("MASTER_ADDR", addr, 1);
    setenv("MASTER_PORT", port_s, 1);
}
