// Package checkpoint is the one owner of a dynconfig state dir: whole
// ConfigMaps checkpointed by UID and resourceVersion, the current and
// last-known-good pointers, the bad marks and the startup record of each
// component version, the lock that gives one process a state dir, the
// quarantine of damaged files, garbage collection, and Inspect, a lock-free
// read-only snapshot for operators. No other package knows the layout or
// the file formats; the CLI and the quickstart read through Inspect.
//
// Layout of a state dir:
//
//	<dir>/lock                                  flock(2) (the directory itself is flocked too)
//	<dir>/checkpoints/<uid>_<resourceVersion>   a ConfigMap in a versioned, checksummed envelope
//	<dir>/checkpoints/<uid>/<resourceVersion>   the same, as older versions wrote it (read, never written,
//	                                            except for a UID holding "_" or a name too long for one file)
//	<dir>/meta/current                          the config assigned, when it was set, when it first ran
//	<dir>/meta/last-known-good                  the rollback target, and when it was set
//	<dir>/meta/confirmed                        the confirmation record of current's run (confirm.go)
//	<dir>/tracking/<componentVersion>/bad-configs.json   bad marks, checksummed envelope
//	<dir>/tracking/<componentVersion>/startups.json      the last MaxStartups startups, checksummed envelope
//	<dir>/tracking/<componentVersion>/envelopes-only     empty: both files above are envelopes from now on
//	<dir>/quarantine/                           corrupt or foreign files moved aside (newest MaxQuarantined kept)
//	<dir>/tmp/                                  temporary files of checkpoint writes in progress
//
// Checkpoints are files in one directory so that saving one costs two
// fsyncs (the file and checkpoints/) whatever its UID: adopting a new config
// is four (checkpoint and current pointer), and garbage collection syncs
// checkpoints/ once per batch (TestFsyncCounts, BenchmarkAdopt). A start
// lists no directory: temporary files of interrupted writes wait for GC.
//
// Directories are created 0700 and files 0600.
//
// # What it guarantees
//
//   - Every write is atomic and durable: after a crash or power loss a file
//     holds its old or its new content, never a mix, and a write that
//     returned nil survives (internal/atomicfile: temporary file, fsync,
//     rename, fsync of the directory).
//   - Every file carries a version and a SHA-256 of its payload bytes, so a
//     torn, truncated or bit-flipped file is detected and a change of Go
//     types cannot make old files look corrupt. Files of older versions
//     without a checksum (bad-configs.json, startups.json) are migrated once:
//     the Open that finds a tracking dir without the envelopes-only marker
//     rewrites them in the current format and then writes the marker (a
//     tracking dir Open creates is marked at once). In a marked dir the
//     plain form (a `{}` or `[]` that a torn or foreign write left) is
//     damage, reported and quarantined, never read as "no marks" or "no
//     startups". Only versions before 8b1fa39 wrote the plain form, and
//     downgrading across that commit is not supported (below), so no
//     supported version writes it into a marked dir.
//   - A checkpoint on disk in both layouts (an older version wrote the
//     nested copy) is read from the flat copy, or from the nested one when
//     the flat one cannot be used; a damaged copy never hides an intact one,
//     and Inspect judges both.
//   - One error type for damage: *CorruptError, matched by
//     errors.Is(err, ErrCorrupt), naming the file and, when the Store moved
//     it to the quarantine, where it went. A file that cannot be read for
//     another reason (EIO, EACCES) is returned as that error and never
//     "repaired": nothing is written over it, so no mark is lost to a
//     transient fault.
//   - Anything that is not a regular file where a state file should be (a
//     directory, a FIFO, a socket, a symlink) is damage: it is never
//     followed or waited on, it is moved to the quarantine, and the write
//     that needs its place goes on. A sub-directory of the layout that was
//     deleted is recreated on every Open.
//   - A pointer that is missing (Open writes both when it creates a state
//     dir), empty or corrupt is damage, never "local": GC then removes
//     nothing until a valid pointer is written, so the checkpoint a damaged
//     pointer named survives.
//   - SetCurrent and SetLastKnownGood refuse to point at a checkpoint that is
//     not on disk.
//   - Bad marks are keyed "<uid>/<resourceVersion>/<payload key>" (MarkKey);
//     marks of configs the node still references (a pointer or a
//     checkpoint) are never evicted; only beyond MaxUnreferencedBadMarks
//     marks of ConfigMaps gone from the node are the oldest dropped.
//     ForgetBad also clears current's first run, so a repaired config starts
//     a fresh trial.
//   - quarantine/ is a layout directory like the others: a symlink, file or
//     FIFO in its place is moved into a new, real quarantine directory, so
//     nothing moved aside leaves the state dir and trimming deletes nothing
//     elsewhere. Moving a file aside never waits: a quarantine the process
//     cannot search (EACCES) or that has no free name leaves the damaged
//     file where it is, and the read that found it still fails cleanly.
//   - Nothing is read or written outside the state dir: UIDs,
//     resourceVersions and the component version are validated as single
//     safe path components before any path is built.
//   - The lock cannot be stolen by unlinking the lock file: the state
//     directory itself is locked as well.
//   - A state dir on a read-only mount (a volume the kernel remounted
//     read-only after an I/O error) opens read-only (Store.ReadOnly): it is
//     read as usual and nothing is written, repaired or moved aside; every
//     write fails with EROFS. Refusing to start would leave the node without
//     its component when the configs it needs are still readable; running
//     read-only lets it run the last-known-good, and since no startup can be
//     recorded, a config on trial is not run (its crash restarts could not
//     be counted), so a crash loop cannot go unnoticed.
//
// # What it does not guarantee
//
//   - The locks are advisory flock(2) locks: they exclude other Stores (in
//     this or another process), not programs that ignore them. They are
//     released when the Store is closed or the process dies.
//   - Atomicity and durability hold on local POSIX file systems with atomic
//     rename(2) (ext4, xfs, btrfs, tmpfs), not on network file systems.
//   - The package is for unix systems (it uses flock and O_NOFOLLOW).
//   - GC between a Save and the SetCurrent that references it removes the
//     just-saved checkpoint; callers that run both must serialize them.
//   - Permissions of directories that already exist are not changed.
//   - Binaries older than the lifecycle redesign (commit 8b1fa39, which
//     added firstRun to the pointers and rejected unknown fields) cannot
//     read the pointers of any later version: downgrading across that
//     commit is not supported.
//
// # Compatibility of state dirs between versions
//
// A node rolled back to its previous component version must not be
// bricked by the state its newer self wrote. The policy, from this version
// on:
//
//   - Every file carries its format version in its envelope
//     ("dynconfig.io/pointer/v1", ...). Within a format version a writer may
//     only add fields that an older reader can ignore safely (omitted when
//     empty; their absence means the older behaviour); readers ignore
//     unknown fields of a verified pointer. Adjacent component versions
//     therefore read each other's pointers and checkpoints in both
//     directions (TestVersionSkew builds the previous commit from git and
//     runs both binaries over one state dir, with a config on trial).
//   - A change an older reader must not ignore bumps the format version. A
//     version reads its own format and the two before it, and writes only
//     its own.
//   - A pointer or checkpoint of a newer format than a version reads is
//     ErrNewerFormat, never damage: it is not quarantined, GC removes
//     nothing while a pointer reads so, and the component runs its local
//     config (or re-adopts its assignment) and reports why (a Warning
//     Event StateNewerFormat, once per Controller); it never crashes or
//     refuses to start.
//   - Bad marks and startups live in tracking/<componentVersion>/, so a
//     version never reads another's; after a downgrade, a config marked bad
//     by the newer version is judged again by the older one.
package checkpoint
