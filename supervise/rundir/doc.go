// Package rundir is the supervisor's claim on its files: one pool per data directory and per
// segment. The supervisor holds an exclusive flock on a lock file in data_dir and on one next to
// the segment for its whole life (Lock), so a second supervisor on either refuses to start
// (naming the holder's pid, ErrInUse) before it touches anything. The segment and worker 0's
// socket live in a private runtime directory (Dir: mode 0700, owned by this user, created before
// anything listens, EnsurePrivateDir), so no other user can squat their names or connect to the
// socket.
//
// # Invariants
//
//   - A lock file is never followed through a symlink nor truncated when it is not a regular
//     file of this user with one link; its name is removed on Release only while it is still the
//     file locked, so two supervisors never hold locks on two files of one name.
//   - A segment file is removed only if it is still the one created (StatID, RemoveIfSame).
//   - Paths are resolved deterministically (ResolvePaths, PoolName): a reload of the same file
//     resolves to the same paths.
//   - A segment larger than its filesystem's free space is refused before it is created
//     (CheckSegmentSpace): a tmpfs file is sparse, and a page that does not fit would SIGBUS.
//
// Everything it needs is passed in: the paths and the segment's options; it reads no
// configuration.
package rundir
