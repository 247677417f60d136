/* agent/agent_tree.c: an agent's children in the launch tree: ssh to each, their plans handed on from tprun,
 * their messages relayed up tagged with their agent's index, their end reported as "c AGENT lost REASON". */
#include "agent/agent_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "runtime_log.h"
#include "ssh/ssh.h"
#include "tprun_wire.h"

int tprun_subtree_plan_line(tprun_subtree_t *T, const char *key, const char *value)
{
    int id, under, k = 0;
    if (strcmp(key, "ssh") == 0) return (T->ssh.ssh = strdup(value)) != NULL ? 1 : -1;
    if (strcmp(key, "sshto") == 0) return (T->ssh.ssh_timeout_s = atof(value)) > 0 ? 1 : -1;
    if (strcmp(key, "exe") == 0) return snprintf(T->exe, sizeof(T->exe), "%s", value) < (int)sizeof(T->exe) ? 1 : -1;
    if (strcmp(key, "child") == 0) {
        if (sscanf(value, "%d %n", &id, &k) != 1 || k == 0 || value[k] == '\0') return -1;
        tprun_subagent_t *g = realloc(T->c, sizeof(*g) * (size_t)(T->n + 1));
        if (g == NULL) return -1;
        T->c = g;
        memset(&g[T->n], 0, sizeof(*g));
        g[T->n].id = id;
        tprun_link_init(&g[T->n].link, NULL, "", -1); /* nothing open until it is started */
        tprun_stream_init(&g[T->n].out, -1, STDOUT_FILENO);
        tprun_stream_init(&g[T->n].err, -1, STDERR_FILENO);
        if ((g[T->n].name = strdup(value + k)) == NULL) return -1;
        T->n++;
        return 1;
    }
    if (strcmp(key, "via") == 0) {
        if (sscanf(value, "%d %d", &id, &under) != 2) return -1;
        int *a = realloc(T->via_id, sizeof(int) * (size_t)(T->nvia + 1));
        if (a != NULL) T->via_id = a;
        int *b = a != NULL ? realloc(T->via_child, sizeof(int) * (size_t)(T->nvia + 1)) : NULL;
        if (b == NULL) return -1;
        T->via_child = b;
        T->via_id[T->nvia] = id;
        T->via_child[T->nvia++] = under;
        return 1;
    }
    return 0;
}

/* Writes one line up the channel to tprun (blocking, as the agent's own messages). */
static void send_up(const char *head, size_t hl, const char *line, size_t len)
{
    char *buf = malloc(hl + len);
    if (buf == NULL) return;
    memcpy(buf, head, hl);
    memcpy(buf + hl, line, len);
    tp_log_write_all(STDOUT_FILENO, buf, hl + len);
    free(buf);
}

/* A child's message: up to tprun, tagged with the child's index unless a grandchild's tag is on it already. */
static void on_child_line(void *ctx, char *line, size_t len)
{
    tprun_subagent_t *c = ctx;
    char head[24];
    if (strncmp(line, "ready ", 6) == 0) c->ready = 1;
    if (len >= 2 && line[0] == 'c' && line[1] == ' ') {
        send_up("", 0, line, len);
        return;
    }
    send_up(head, (size_t)snprintf(head, sizeof(head), "c %d ", c->id), line, len);
}

/* ssh's stderr: kept as the reason while the child is not ready, then passed on (tprun prints it). */
static void on_child_err_line(void *ctx, char *line, size_t len)
{
    tprun_subagent_t *c = ctx;
    size_t n = len > 0 && line[len - 1] == '\n' ? len - 1 : len;
    if (n > 0 && line[n - 1] == '\r') n--; /* ssh ends its own messages with CR LF */
    if (c->ready) {
        tp_log_write_all(STDERR_FILENO, line, len);
    } else if (n > 0) {
        if (n >= sizeof(c->last)) n = sizeof(c->last) - 1;
        memcpy(c->last, line, n);
        c->last[n] = '\0';
    }
}

static void on_child_err(void *arg, unsigned revents)
{
    tprun_subagent_t *c = arg;
    (void)revents;
    if (c->err.fd >= 0 && tprun_stream_pump(&c->err, &(tprun_prefix_t){"", 0}) == 0) {
        tprun_ev_remove(c->err_ev);
        c->err_ev = NULL;
        tprun_stream_close(&c->err, &(tprun_prefix_t){"", 0});
    }
}

/* The child's channel ended: tprun hears it as "c AGENT lost REASON" (ssh's words, when it said something). */
static void on_child_out(void *arg, unsigned revents)
{
    tprun_subagent_t *c = arg;
    tprun_prefix_t none = {"", 0};
    char why[700], esc[3 * sizeof(why)], head[24];
    (void)revents;
    if (tprun_stream_pump(&c->out, &none) != 0) return;
    tprun_ev_remove(c->out_ev);
    c->out_ev = NULL;
    tprun_stream_close(&c->out, &none);
    if (c->err.fd >= 0) {
        tprun_ev_remove(c->err_ev);
        c->err_ev = NULL;
        tprun_stream_drain(&c->err, &none);
    }
    tprun_link_close(&c->link);
    c->open = 0;
    c->tree->open--;
    if (c->last[0] != '\0') snprintf(why, sizeof(why), "ssh from host %s said: %s", c->tree->host, c->last);
    else
        snprintf(why, sizeof(why), "the ssh connection from host %s ended%s", c->tree->host,
                 c->ready ? "" : " before the agent answered");
    tprun_wire_escape(why, esc);
    size_t hl = (size_t)snprintf(head, sizeof(head), "c %d lost ", c->id), el = strlen(esc);
    esc[el++] = '\n';
    send_up(head, hl, esc, el);
}

static void on_child_reaped(void *arg, pid_t pid, int wstatus)
{
    tprun_subagent_t *c = arg;
    (void)wstatus;
    c->child_ev = NULL;
    c->pid = 0;
    tprun_keeper_tell(c->tree->keeper, 'R', pid);
}

int tprun_subtree_start(tprun_subtree_t *T, tprun_evloop_t *ev, tprun_keeper_t *keeper, const sigset_t *child_mask,
                        const char *host, char *err, size_t err_len)
{
    T->ev = ev;
    T->keeper = keeper;
    T->host = host;
    for (int i = 0; i < T->n; i++) {
        tprun_subagent_t *c = &T->c[i];
        c->tree = T;
        tprun_link_init(&c->link, ev, c->name, -1);
        tprun_stream_init(&c->out, -1, STDOUT_FILENO);
        tprun_stream_init(&c->err, -1, STDERR_FILENO);
        char **argv = tprun_ssh_agent_argv(&T->ssh, T->exe, c->name);
        int fds[3];
        pid_t pid = argv != NULL ? tprun_ssh_spawn(argv, child_mask, "ssh", fds) : -1;
        free(argv);
        if (pid < 0) {
            snprintf(err, err_len, "cannot start ssh to host %s: %s", c->name, strerror(errno));
            return -1;
        }
        c->pid = pid;
        tprun_keeper_tell(keeper, 'S', pid);
        c->link.out_fd = fds[0];
        c->out.fd = fds[1];
        c->err.fd = fds[2];
        c->out.on_line = on_child_line;
        c->err.on_line = on_child_err_line;
        c->out.ctx = c->err.ctx = c;
        c->open = 1;
        T->open++;
        c->child_ev = tprun_ev_child(ev, pid, 0, on_child_reaped, c);
        c->out_ev = tprun_ev_fd(ev, c->out.fd, EPOLLIN, 0, on_child_out, c);
        c->err_ev = tprun_ev_fd(ev, c->err.fd, EPOLLIN, 0, on_child_err, c);
        if (c->child_ev == NULL || c->out_ev == NULL || c->err_ev == NULL) {
            snprintf(err, err_len, "cannot watch the ssh to host %s: %s", c->name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int tprun_subtree_route(void *tree, char *msg, size_t len)
{
    tprun_subtree_t *T = tree;
    size_t used;
    long id = len > 2 && msg[1] == ' ' ? tprun_wire_parse_uint(msg + 2, len - 2, 1L << 30, &used) : -1;
    if (id < 0 || msg[2 + used - 1] != ' ') return 0;
    int child = -1, direct = 0;
    for (int i = 0; i < T->n && child < 0; i++)
        if (T->c[i].id == id) child = (int)id, direct = 1;
    for (int i = 0; i < T->nvia && child < 0; i++)
        if (T->via_id[i] == id) child = T->via_child[i];
    for (int i = 0; i < T->n; i++) {
        if (T->c[i].id != child) continue;
        /* Its own line goes unwrapped; a line for an agent further down keeps its tag for the next hop. */
        const char *line = direct ? msg + 2 + used : msg;
        char *nl = malloc(strlen(line) + 2);
        if (nl == NULL) return 1;
        sprintf(nl, "%s\n", line);
        tprun_link_send(&T->c[i].link, nl);
        free(nl);
        return 1;
    }
    return 0;
}

void tprun_subtree_close(tprun_subtree_t *T)
{
    for (int i = 0; i < T->n; i++) tprun_link_close(&T->c[i].link);
}

void tprun_subtree_free(tprun_subtree_t *T)
{
    for (int i = 0; i < T->n; i++) {
        free(T->c[i].name);
        tprun_link_free(&T->c[i].link);
        tprun_stream_free(&T->c[i].out);
        tprun_stream_free(&T->c[i].err);
    }
    free(T->c);
    free(T->via_id);
    free(T->via_child);
    free(T->ssh.ssh);
    memset(T, 0, sizeof(*T));
}
