#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* Swift cannot call variadic C functions; these wrappers fix the argument lists. */

/* The form MHD_OPTION_URI_LOG_CALLBACK expects (microhttpd.h has no typedef for it). */
typedef void *(*gatehouse_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/* Options for gatehouse_mhd_start, in the types libmicrohttpd reads them with va_arg. */
struct gatehouse_mhd_options {
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int per_ip_connection_limit;
    unsigned int connection_timeout;
    size_t connection_memory_limit;
    unsigned int listen_backlog;
    const struct sockaddr *bind_address;
    MHD_RequestCompletedCallback completed;
    void *completed_cls;
    gatehouse_mhd_uri_log_callback uri_log;
    void *uri_log_cls;
    MHD_AcceptPolicyCallback accept_policy;
    void *accept_policy_cls;
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_connection_cls;
};

static inline struct MHD_Daemon *gatehouse_mhd_start(unsigned int flags,
                                                     uint16_t port,
                                                     MHD_AccessHandlerCallback handler,
                                                     void *handler_cls,
                                                     const struct gatehouse_mhd_options *o) {
    return MHD_start_daemon(flags, port, o->accept_policy, o->accept_policy_cls, handler, handler_cls,
                            MHD_OPTION_THREAD_POOL_SIZE, o->thread_pool_size,
                            MHD_OPTION_CONNECTION_LIMIT, o->connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->per_ip_connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, o->connection_timeout,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->connection_memory_limit,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, o->listen_backlog,
                            MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
                            MHD_OPTION_SOCK_ADDR, o->bind_address,
                            MHD_OPTION_NOTIFY_COMPLETED, o->completed, o->completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, o->uri_log, o->uri_log_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, o->notify_connection, o->notify_connection_cls,
                            MHD_OPTION_END);
}

/* The port the daemon is bound to (useful after binding port 0), or 0. */
static inline uint16_t gatehouse_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/* The peer address of a connection, or NULL. */
static inline const struct sockaddr *gatehouse_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/* The connection's socket, or -1. */
static inline int gatehouse_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* What MHD_OPTION_NOTIFY_CONNECTION's callback stored in *socket_context for the connection, or NULL. */
static inline void *gatehouse_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}
