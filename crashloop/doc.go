// Package crashloop decides whether the config a component is trying is
// crash-looping: the "imperfect metric" of the Dynamic Kubelet
// Configuration proposal. It is pure: startup times in, verdict out, no I/O
// and no clock (package checkpoint keeps the startups file; the caller
// passes the time).
//
// # The count
//
// A config is adopted by one start of the component: the start that ran
// it first, whether the config was assigned while the component was down
// (adopted at startup) or the running process set it and exited for its
// successor to adopt it (adopted by a restart), or was applied in process
// by a reload. That start is not a crash. Every start after it, within the
// config's trial window, is a crash restart. Threshold N tolerates N crash
// restarts; the N+1st trips the verdict. The proposal puts it as "we
// implicitly allow one more restart than the user-provided threshold":
// threshold 0 trips on the first crash restart, never on the adopting start.
//
// The caller makes that true by recording each startup before it decides
// (so the adopting start is recorded before the config's first run) and by
// passing the config's first-run time as Input.Since: only startups
// strictly after it count. The count is the same for both ways of adoption
// because both measure from the first run, not from the time the config
// was assigned.
//
// Only the crash restarts within one trial period before now count: more
// than N restarts within a trial is a crash loop, however long ago the
// config first ran. A config is on trial until it has run a full trial in
// one process, so a fixed window from the first run would let a config that
// was first run before a long outage crash forever afterwards; a window that
// slides keeps catching it, while restarts spread wider apart than the trial
// (a node rebooted now and then) are not a crash loop. A config that
// crashes more slowly than that is never found crash-looping; it is also
// never promoted, because promotion needs a full trial of uptime. The caller
// does not ask about a config that is already last-known-good.
//
// # Dead ends
//
// The same verdict, with Since set to the time the current config was marked
// bad, tells whether the rollback target crash-loops too: a dead end, where
// the crash is not the config's fault. The caller reports it.
//
// # What it does not do
//
// The verdict is imperfect. It sees restarts, not their cause: a crash loop
// that has nothing to do with the config (a broken disk, a bug in the
// component, an operator restarting it in a loop) trips it just the same.
// Thresholds outside 0..MaxThreshold are rejected by ValidateThreshold and
// clamped by CrashLooping.
//
// # Time
//
// A clock step (an RTC corrected by NTP, a VM restored from a snapshot) must
// neither invent crashes nor hide them, so the count does not compare
// timestamps to decide what came first: it uses the order the startups were
// recorded in, which is the order they happened. The rule:
//
//  1. The adopting start is found by position. The caller records, as the
//     config's first run, the adopting start's own recorded time, so the
//     adopting start is the last startup whose time equals Since. When none
//     does (a config adopted in process by a reload, the time of a bad mark,
//     a first run recorded by an older version), it is the last startup
//     stamped no later than Since; and when Since lies in the future of Now
//     (the clock was stepped back after the first run), the last such
//     startup that also lies in the future of Now, since the adopting start
//     was stamped before the step.
//  2. The crash restarts are the startups recorded after the adopting one,
//     wherever their stamps lie relative to Since: a startup stamped before
//     a backward step is counted if it was recorded after the adoption, and
//     one recorded before the adoption is never counted, however far in the
//     future its stamp is.
//  3. The trial window keeps the crash restarts stamped after Now minus the
//     trial. A startup stamped in the future of Now counts only for a
//     config adopted in the future of Now too (Since after Now: the run
//     began before a backward step, and its restarts before the step are
//     its crashes). For a config adopted in the present (Since not after
//     Now), startups later than now are no crashes of the current run:
//     they are the stamps of a clock that ran ahead and was corrected (an
//     RTC wrong at boot), and counting them would find a config crash-
//     looping at its first start. Had those starts been a crash loop, each
//     of them decided with its own clock, as far ahead, and found it. A
//     forward step ages the startups before it as if that time had passed:
//     restarts spread wider than a trial are not a crash loop, and a crash
//     loop that goes on after the step is found within Threshold+1 more
//     starts.
//
// So a backward step neither makes old startups count against a new config
// (TestClockStepBackDoesNotInventCrashes) nor hides crash restarts stamped
// before or after it (TestClockStepBackDoesNotHideCrashes), and stamps from
// a clock that ran ahead are no crashes of a config adopted after it was
// corrected (TestStartupsInTheFutureOfNow).
package crashloop
