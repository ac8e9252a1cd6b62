// Package checkpoint is the on-disk store of a dynconfig state dir: whole
// ConfigMaps checkpointed by UID and resourceVersion, the current and
// last-known-good pointers, the lock that gives one process a state dir, and
// the garbage collection of checkpoints that no pointer references.
//
// Layout of a state dir:
//
//	<dir>/lock                                  flock(2), held while the Store is open
//	<dir>/checkpoints/<uid>/<resourceVersion>   a ConfigMap in a versioned, checksummed envelope
//	<dir>/meta/current                          the NodeConfigSource in use, and when it was set
//	<dir>/meta/last-known-good                  the rollback target, and when it was set
//	<dir>/tracking/<componentVersion>/          created here; other packages write into it
//
// Directories are created 0700 and files 0600.
//
// # What it guarantees
//
//   - Every write (Save, SetCurrent, SetLastKnownGood) is atomic and durable:
//     after a crash or power loss a file holds its old or its new content,
//     never a mix, and a write that returned nil survives. Writes go through
//     internal/atomicfile (temporary file, fsync, rename, fsync of the
//     directory); a new <uid> directory is fsynced into checkpoints/ before
//     the checkpoint inside it is written, so a saved checkpoint cannot lose
//     its directory.
//   - SetCurrent and SetLastKnownGood refuse to point at a checkpoint that is
//     not on disk, so with Save-then-Set ordering a pointer never references
//     a checkpoint that was not completely saved.
//   - Nothing is read or written outside the state dir: UIDs, resourceVersions
//     and the component version are validated as single safe path components
//     (ValidateKey) before any path is built.
//   - A torn, truncated, garbage or otherwise corrupt checkpoint or pointer is
//     reported as a *CorruptError naming the file (errors.Is(err, ErrCorrupt)),
//     never a panic. The checksum covers the serialized payload bytes, and the
//     envelope carries a version, so a change of Go types cannot make old
//     files look corrupt. What to do about corruption (fall back to the
//     last-known-good or the local config) is the caller's decision.
//   - A missing checkpoint is ErrNotFound. A missing or empty pointer file
//     means the local config.
//   - GC never removes a checkpoint that current or last-known-good
//     references, and removes nothing at all if either pointer cannot be read.
//   - Open removes the temporary files of interrupted writes. It repairs
//     nothing else: unexpected entries are logged and left in place.
//
// # What it does not guarantee
//
//   - The lock is an advisory flock(2): it excludes other Stores (in this or
//     another process), not programs that ignore it. It is released when the
//     Store is closed or the process dies.
//   - Atomicity and durability hold on local POSIX file systems with atomic
//     rename(2) (ext4, xfs, btrfs, tmpfs), not on network file systems.
//   - The package is for unix systems (it uses flock and O_NOFOLLOW).
//   - GC between a Save and the SetCurrent that references it removes the
//     just-saved checkpoint; callers that run both must serialize them.
//   - Permissions of directories that already exist are not changed.
package checkpoint
