// Package listeners holds the supervisor's listening sockets across restarts and upgrades.
//
// The listening sockets outlive the supervisor, so that a restart or an upgrade refuses no
// connection: whoever holds a socket while no supervisor serves it, the kernel queues the
// connections in its accept backlog until the next supervisor's worker 0 (crawler listener) or
// the supervisor itself (admin listener) accepts them. Two holders, by name:
//
//   - systemd's socket activation (deploy/freshq-admin.socket, deploy/freshq-crawler.socket):
//     systemd binds the sockets and keeps them open across `systemctl restart`; the
//     supervisor finds them as LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES say, by their
//     FileDescriptorName= (fdAdmin, fdCrawler);
//   - a handover (SIGUSR2, HandOver): the running supervisor starts the binary now at its
//     path with its sockets as descriptors 3 and on, named in envHandoverFDs, for the child of
//     the pid in envHandoverPID only; the child confirms on a pipe (fdReady) that it takes
//     over, and only then does the old supervisor stop as on SIGTERM, which answers every
//     request it accepted (the admin listener's drain).
//
// A socket found neither way is bound by the supervisor itself, as before. An inherited
// socket must be on the address the configuration names (listen, serve.listen): the token
// rule and the Host check judge the configured address, so they must judge the real one.
//
// # Invariants
//
//   - Every inherited descriptor is named, once: a name it does not know, or one given twice, is
//     refused (Inherit). Their environment is cleared and they are close-on-exec, so no worker
//     inherits them.
//   - A descriptor handed to another process never has its socket's mode changed (socketFile).
//   - A handover that fails leaves this supervisor serving as it was; under systemd there is no
//     handover (ErrHandoverUnderSystemd).
//
// It needs the configured addresses (listen, serve.listen) passed in, and nothing else of the
// configuration.
package listeners
