// Package crashloop tracks how often a component starts, and decides whether
// the config it is trying is crash-looping: the "imperfect metric" of the
// Dynamic Kubelet Configuration proposal.
//
// # What it does
//
// A Tracker owns one file, <Dir>/startups.json (FileName): a JSON list of
// timestamps, one per startup of the component, oldest first. The component
// calls Tracker.RecordStartup once, early, every time it starts. Later in the
// same startup it asks Tracker.CrashLooping whether the config it is about to
// use has crash-looped: whether the time since that config was set as current
// has not yet exceeded its trial period, and the number of startups recorded
// strictly after that set time exceeds the config's crash-loop threshold.
// CrashLooping (the function) is the same verdict over explicit inputs, with
// no I/O.
//
// # Why "exceeds"
//
// The running process sets a new config as current and then exits so that its
// successor adopts it. That successor's own startup is therefore the first one
// recorded after the set time, and it is not a crash. Counting with "exceeds"
// rather than "reaches" spends one unit of slack on that adopting restart: with
// threshold N, N startups after the set time (the adoption and N-1 restarts
// after it) are tolerated, and the startup that makes N+1 trips the verdict.
// The consequence is that threshold 0 trips on the adopting startup itself,
// so a config with threshold 0 is marked bad as soon as it is adopted; a
// caller that wants "no crash tolerated" uses threshold 1. Thresholds outside
// 0..MaxThreshold are rejected (ValidateThreshold).
//
// The verdict counts the startup of the process asking, so RecordStartup must
// come before CrashLooping in each startup (the facade's Bootstrap order).
//
// # What it does not do
//
// The verdict is imperfect. It sees restarts, not their cause: a crash loop
// that has nothing to do with the config (a broken disk, a bug in the
// component, an operator restarting it in a loop) trips it just the same.
// Telling those apart is the caller's job: when the last-known-good config
// also crash-loops after a rollback, the node is in a dead-end state and needs
// an out-of-band repair; this package cannot see that. It also does not know
// which config is current or when it was set: the caller passes the set time
// (a zero set time, "unknown", never crash-loops). Startups are not tracked
// outside the trial period: once Now is more than the trial past the set time,
// the verdict is false whatever the count.
//
// The Tracker serializes its own calls, but it does not lock the file against
// other processes: the caller holds the state-directory lock. It does not
// version the file format; put the Tracker's Dir under a directory named for
// the component version, as the on-disk layout does.
//
// # Bounded file
//
// RecordStartup keeps only the most recently recorded threshold+1 entries, so
// the file never holds more than MaxThreshold+1 (11) timestamps: enough to
// decide whether the count after any set time exceeds the threshold, and no
// more. Trimming is by recording order, not by timestamp value. Because
// trimming discards history, RecordStartup must be given a threshold at least
// as large as the one the next verdict will use; when that is not yet known
// (the config to try is read after the startup is recorded), pass MaxThreshold.
//
// # Corrupt files
//
// A missing file means no startups. A file that cannot be decoded (garbage,
// truncated, not a list, a bad timestamp, larger than any file this package
// writes) or that is not a regular file (a directory, a FIFO) is reported as
// a *CorruptError naming the file, and every read treats it as empty: a
// corrupt file can delay a crash-loop verdict, never cause a false one.
// RecordStartup replaces a corrupt file with a fresh one holding only the new
// startup and then returns the *CorruptError, so that the caller can log it;
// a *CorruptError from RecordStartup never means the startup was lost. Writes
// are atomic and durable (temporary file, fsync, rename, fsync of the
// directory) with mode 0600; a crash mid-write leaves the old file or the new
// one, never a mix. No input makes the package panic.
//
// # Time
//
// The Tracker stamps startups in UTC with nanoseconds (RFC 3339 with a fractional
// second), so that a startup and a set time a few milliseconds apart are
// ordered exactly; plain RFC 3339 timestamps, with any offset, are accepted
// on read. All comparisons use wall-clock time from the Tracker's clock. When
// the clock steps backwards, startups stamped before the step can lie in the
// future of Now: they are still counted if they follow the set time, because
// they were real startups stamped by the same clock as the set time, and
// dropping them would let a crash loop that straddles a clock correction go
// unnoticed. A set time in the future of Now is within the trial (a negative
// elapsed time does not exceed any non-negative trial), and startups stamped
// after the step that lie before that set time are not counted, so a clock
// step can delay a verdict but does not invent startups.
package crashloop
