package dynconfig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dynconfig/dynconfig/checkpoint"
	"github.com/dynconfig/dynconfig/components"
	"github.com/dynconfig/dynconfig/lkg"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/source"
	"github.com/dynconfig/dynconfig/status"
)

var (
	lifecycleSeed      = flag.Uint64("lifecycle.seed", 20261123, "seed of the first random event sequence of TestLifecycleModel")
	lifecycleSequences = flag.Int("lifecycle.sequences", 300, "how many random event sequences TestLifecycleModel runs (-short: 40)")
	lifecycleSteps     = flag.Int("lifecycle.steps", 40, "events per sequence")
)

// TestLifecycleModel drives the real Controller (directory source, fake
// clock, processes simulated one after the other over one state dir) with
// random event sequences, and checks after every event the invariants of the
// seed's state machine against an independent record of what happened:
//
//   - a config with a bad mark never runs;
//   - a config becomes last-known-good only in a process that ran it as
//     current for a full trial (and, with RequireHealthy, after MarkHealthy
//     in that run);
//   - the config that runs is current, last-known-good or local;
//   - ConfigOK says what runs (current True, rollback target False or
//     Unknown, the running config's message during a sync failure);
//   - a config that fails validation is marked bad and never runs;
//   - a crash-looping config is marked bad after exactly threshold+1 runs,
//     counted from its first run, or from its first run after forget-bad
//     repaired it (crash evidence from before a repair does not count);
//   - a config the component refused to apply in process (Reload failed)
//     is marked bad, "failed to apply", and does not run;
//   - the state dir verifies: no torn or corrupt file outside the step
//     that damaged one, every pointer's checkpoint present;
//   - with a confirmation deadline (ConfirmWithin), a config on trial that
//     the component did not confirm (MarkHealthy while it ran as current)
//     does not run ConfirmWithin after its first run, counted in time that
//     passed (the model's own clock, which a step back of the node's clock
//     does not move), with ConfirmWithin more allowed per step back since
//     its first run; and a config is marked "not confirmed" only when it
//     was not confirmed and its deadline passed: never early, never after
//     a confirmation, whatever restarts came between; a confirmation is on
//     disk (meta/confirmed, for current's run) once Run woke on it.
//
// Events besides assignments, restarts and crashes: time passing (past the
// trial, past ConfirmWithin), MarkHealthy (a confirmation), the node's
// clock stepped back, damage to any state file including the confirmation
// record.
//
// A failure prints the seed: rerun with -lifecycle.seed=N -lifecycle.sequences=1.
func TestLifecycleModel(t *testing.T) {
	n := *lifecycleSequences
	if testing.Short() && n > 40 {
		n = 40
	}
	for i := 0; i < n; i++ {
		seed := *lifecycleSeed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runLifecycleSequence(t, seed, *lifecycleSteps)
		})
	}
}

// FuzzLifecycle runs one event sequence chosen by the fuzzer's bytes.
func FuzzLifecycle(f *testing.F) {
	f.Add(uint64(1), uint8(20))
	f.Add(uint64(42), uint8(60))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		runLifecycleSequence(t, seed, int(steps%80))
	})
}

// toggleRemote is a Remote that can be made unreachable.
type toggleRemote struct {
	source.Remote
	down *atomic.Bool
}

func (r toggleRemote) Assigned(ctx context.Context) (source.Assignment, error) {
	if r.down.Load() {
		return source.Assignment{}, errors.New("connection refused")
	}
	return r.Remote.Assigned(ctx)
}

// sim is one simulated node: the state dir and the source dir persist; the
// component process comes and goes.
type sim struct {
	t              *testing.T
	n              *node
	rng            *rand.Rand
	seed           uint64
	log            []string
	reload         bool
	requireHealthy bool
	down           atomic.Bool
	reloadFails    bool
	broken         bool // every start of the component crashes (a node problem)

	c              *Controller[testConfig] // the process; nil when stopped
	restarted      bool
	runStart       time.Time // when the process started running its config
	healthyRun     bool      // MarkHealthy called in this run
	runs           map[string]int
	thresholds     map[string]int // config identity -> crash-loop threshold
	crashy         map[string]bool
	invalid        map[string]bool
	lastLKG        string
	repaired       map[string]bool // configs whose bad mark forget-bad removed, not run since
	reloads        []reloadCall    // the Reload calls of the sync that runs
	damaged        bool            // the last step damaged a state file on purpose
	pointerDamaged [2]bool         // current, last-known-good damaged on purpose
	cmSeq          int

	// The confirmation deadline (ConfirmWithin), in the model's own time.
	confirmWithin time.Duration
	trueNow       time.Duration            // time that passed, whatever the node's clock says
	firstRunAt    map[string]time.Duration // config -> when it first ran as current (trueNow)
	confirmed     map[string]bool          // config -> MarkHealthy while it ran as current
	stepBacks     []time.Duration          // when the node's clock was stepped back (trueNow)
	notConfirmed  map[string]bool          // NotConfirmed marks already checked
	uncertain     map[string]bool          // configs whose first run was lost with a damaged pointer
}

// reloadCall is one call of the component's Reload.
type reloadCall struct {
	value   int
	refused bool
}

const modelTrial = time.Minute

func runLifecycleSequence(t *testing.T, seed uint64, steps int) {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		runs: map[string]int{}, thresholds: map[string]int{}, crashy: map[string]bool{}, invalid: map[string]bool{},
		repaired: map[string]bool{}, firstRunAt: map[string]time.Duration{}, confirmed: map[string]bool{}, notConfirmed: map[string]bool{}, uncertain: map[string]bool{}}
	s.n = newNode(t, "")
	s.reload = s.rng.IntN(2) == 0
	s.requireHealthy = s.rng.IntN(2) == 0
	if s.rng.IntN(2) == 0 {
		s.confirmWithin = 2 * time.Minute
		s.requireHealthy = true // ConfirmWithin implies it
	}
	s.logf("reload=%v requireHealthy=%v confirmWithin=%v", s.reload, s.requireHealthy, s.confirmWithin)
	defer func() {
		if t.Failed() {
			t.Logf("events of seed %d (rerun: go test -run 'TestLifecycleModel' -lifecycle.seed=%d -lifecycle.sequences=1):\n  %s",
				seed, seed, strings.Join(s.log, "\n  "))
		}
		s.stop()
	}()
	s.start()
	for i := 0; i < steps && !t.Failed(); i++ {
		s.step()
		s.check()
	}
}

func (s *sim) logf(format string, args ...any) { s.log = append(s.log, fmt.Sprintf(format, args...)) }

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d: "+format, append([]any{s.seed}, args...)...)
}

// newConfigMap writes a ConfigMap of one of the kinds and returns its name.
func (s *sim) newConfigMap(kind string) string {
	s.cmSeq++
	name := fmt.Sprintf("cm-%d", s.cmSeq)
	threshold := s.rng.IntN(4)
	payload := fmt.Sprintf(`{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: %d}`, s.cmSeq)
	switch kind {
	case "invalid":
		payload = `{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: -1}`
	case "crashing":
		payload = fmt.Sprintf(`{apiVersion: test.dynconfig.io/v1, kind: TestConfig, value: %d, name: crash}`, s.cmSeq)
	}
	s.n.write(filepath.Join(s.n.srcDir, source.ConfigMapsDir, name+".yaml"), fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: kube-system\n  name: %s\n  uid: uid-%s\n  annotations:\n"+
			"    %s: %q\n    %s: \"%d\"\ndata:\n  config: %q\n  other: %q\n",
		name, name, components.TrialDurationAnnotation, modelTrial.String(), components.CrashLoopThresholdAnnotation, threshold,
		payload, payload))
	return name
}

func (s *sim) assign(name, key string) {
	s.n.write(filepath.Join(s.n.srcDir, source.AssignmentFile),
		fmt.Sprintf("configMap: {namespace: kube-system, name: %s, uid: uid-%s, kubeletConfigKey: %s}\n", name, name, key))
}

// step runs one random event.
func (s *sim) step() {
	switch r := s.rng.IntN(100); {
	case r < 14:
		name := s.newConfigMap("good")
		s.logf("assign good %s", name)
		s.assign(name, "config")
		s.sync()
	case r < 22:
		name := s.newConfigMap("invalid")
		s.logf("assign invalid %s", name)
		s.assign(name, "config")
		s.sync()
	case r < 30:
		name := s.newConfigMap("crashing")
		s.logf("assign crash-looping %s", name)
		s.assign(name, "config")
		s.sync()
	case r < 34:
		s.logf("assign an absent ConfigMap")
		s.n.write(filepath.Join(s.n.srcDir, source.AssignmentFile), "configMap: {namespace: kube-system, name: absent, uid: uid-absent, kubeletConfigKey: config}\n")
		s.sync()
	case r < 38:
		if cur := s.assigned(); cur != "" {
			s.logf("change the payload key of %s", cur)
			s.assign(cur, "other")
			s.sync()
		}
	case r < 42:
		if cur := s.assigned(); cur != "" {
			s.logf("edit %s in place", cur)
			path := filepath.Join(s.n.srcDir, source.ConfigMapsDir, cur+".yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				s.fatalf("%v", err)
			}
			s.cmSeq++
			s.n.write(path, string(data)+fmt.Sprintf("  edited-%d: \"yes\"\n", s.cmSeq))
			s.sync()
		}
	case r < 45:
		s.logf("empty assignment")
		s.n.write(filepath.Join(s.n.srcDir, source.AssignmentFile), "")
		s.sync()
	case r < 52:
		s.logf("restart")
		s.stop()
		s.start()
	case r < 56:
		s.logf("API server down")
		s.down.Store(true)
		s.sync()
	case r < 62:
		s.logf("API server up")
		s.down.Store(false)
		s.sync()
	case r < 65:
		s.reloadFails = !s.reloadFails
		s.logf("reloads fail: %v", s.reloadFails)
	case r < 72:
		s.logf("MarkHealthy")
		if s.c != nil {
			if st := s.c.snapshot(); st.running.Source != nil && lkg.Same(st.running.Source, st.current.Source) {
				s.confirmed[lkg.Key(st.running.Source)] = true
			}
			s.c.MarkHealthy()
			s.healthyRun = true
			s.promote()
			if s.confirmWithin > 0 && s.rng.IntN(2) == 0 {
				// A confirmation must outlive the process that made it.
				s.check() // what this process did, before the next one
				s.logf("restart right after the confirmation")
				s.stop()
				s.start()
			}
		}
	case r < 86:
		d := []time.Duration{10 * time.Second, 30 * time.Second, modelTrial + time.Second, 5 * time.Minute}[s.rng.IntN(4)]
		s.logf("time passes: %v", d)
		s.advance(d)
		s.promote()
	case r < 88:
		d := []time.Duration{30 * time.Second, 10 * time.Minute, 2 * time.Hour}[s.rng.IntN(3)]
		s.logf("the node's clock is stepped back %v", d)
		s.n.clock.SetTime(s.n.clock.Now().Add(-d))
		s.stepBacks = append(s.stepBacks, s.trueNow)
		s.promote()
	case r < 91:
		s.broken = !s.broken
		s.logf("node broken: %v", s.broken)
		if s.broken {
			s.crash()
		}
	case r < 95:
		s.logf("forget-bad of current, after a repair")
		s.broken = false
		s.stop()
		st, err := checkpoint.Open(checkpoint.Options{Dir: s.n.stateDir, ComponentVersion: "v1.0.0"})
		if err != nil {
			s.fatalf("open for forget-bad: %v", err)
		}
		if cur, err := st.Current(); err == nil && cur.Source != nil {
			forgotten, err := st.ForgetBad(checkpoint.MarkKey(cur.Source))
			if err != nil {
				s.fatalf("ForgetBad: %v", err)
			}
			if len(forgotten) > 0 {
				// A fresh trial: its crash evidence from before the
				// repair no longer counts (DESIGN, turn 2), and its
				// confirmation deadline starts again.
				id := lkg.Key(cur.Source)
				s.repaired[id] = true
				delete(s.firstRunAt, id)
				delete(s.confirmed, id)
				delete(s.notConfirmed, id)
				delete(s.uncertain, id)
			}
		}
		st.Close()
		s.start()
	default:
		files := []string{"meta/current", "meta/last-known-good", "tracking/v1.0.0/bad-configs.json", "tracking/v1.0.0/startups.json", "meta/confirmed"}
		f := files[s.rng.IntN(len(files))]
		s.logf("corrupt %s and restart", f)
		curID := ""
		if s.c != nil {
			curID = lkg.Key(s.c.snapshot().current.Source)
		}
		s.stop()
		if err := os.WriteFile(filepath.Join(s.n.stateDir, f), []byte("{\"torn"), 0o600); err != nil {
			s.fatalf("%v", err)
		}
		s.damaged = true
		switch f {
		case "meta/current":
			s.pointerDamaged[0] = true
			// The config's deadline starts again when it runs next.
			// The first run is lost with the pointer; the record of
			// a confirmation is keyed to the first run, and whether a
			// re-adoption's first run is the same instant is not the
			// model's to know: the deadline invariants leave the
			// config alone until forget-bad gives it a fresh trial.
			s.firstRunAt = map[string]time.Duration{}
			if curID != "" {
				s.uncertain[curID] = true
			}
		case "meta/confirmed":
			// The confirmation is lost: a later revert is allowed.
			s.confirmed = map[string]bool{}
		case "meta/last-known-good":
			s.pointerDamaged[1] = true
		}
		s.start()
	}
}

// assigned returns the name of the assigned ConfigMap, if any.
func (s *sim) assigned() string {
	data, _ := os.ReadFile(filepath.Join(s.n.srcDir, source.AssignmentFile))
	_, rest, ok := strings.Cut(string(data), "name: ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ",")
	if name == "absent" {
		return ""
	}
	return name
}

func (s *sim) controller() *Controller[testConfig] {
	return s.n.controller(func(o *Options[testConfig]) {
		o.Remote = toggleRemote{Remote: o.Remote, down: &s.down}
		o.RequireHealthy = s.requireHealthy
		o.ConfirmWithin = s.confirmWithin
		o.Restart = func() { s.restarted = true }
		if s.reload {
			o.Reload = func(_ context.Context, cfg *testConfig) error {
				refused := s.reloadFails && cfg.Value > 0
				s.reloads = append(s.reloads, reloadCall{value: cfg.Value, refused: refused})
				if refused {
					return errors.New("reload refused")
				}
				return nil
			}
		}
	})
}

// start starts the component, and restarts it for as long as the config it
// runs crashes at startup (a process manager's restart loop).
func (s *sim) start() {
	firstRuns := map[string]bool{} // configs whose first run is in this loop
	loopRuns := map[string]int{}   // runs of each config in this loop
	for attempt := 0; ; attempt++ {
		if attempt > 40 {
			s.fatalf("more than 40 crash restarts in a row")
		}
		s.restarted = false
		s.c = s.controller()
		cfg, err := s.c.Bootstrap(s.n.ctx())
		if err != nil {
			s.fatalf("Bootstrap: %v", err)
		}
		s.c.collectGarbage(s.n.ctx()) // what Run does first
		st := s.c.snapshot()
		id := lkg.Key(st.running.Source)
		// The model's own record, not only the state dir's: the first run
		// after an adoption, and the first run after a repair.
		if id != "" && (st.current.FirstRun.Equal(s.n.clock.Now()) || s.repaired[id]) {
			firstRuns[id] = true
		}
		delete(s.repaired, id)
		s.startedRun()
		loopRuns[id]++
		s.checkCrashLoopCount(firstRuns, loopRuns)
		s.check()
		// A broken node crashes on every config, forever; the model stops
		// the loop after enough restarts to reach any dead end.
		if !(s.broken && attempt < 15 || cfg.Name == "crash") {
			return
		}
		s.logf("  crash (running %s)", idOrLocal(id))
		s.c.Close()
		s.c = nil
		s.advance(time.Second)
	}
}

func idOrLocal(id string) string {
	if id == "" {
		return "local"
	}
	return id
}

func (s *sim) startedRun() {
	st := s.c.snapshot()
	id := lkg.Key(st.running.Source)
	s.runs[id]++
	s.runStart = s.n.clock.Now()
	// A repaired config's first run is this one (a reload's, when it is
	// not in a restart loop).
	delete(s.repaired, id)
	if _, ok := s.firstRunAt[id]; !ok && id != "" && lkg.Same(st.running.Source, st.current.Source) {
		s.firstRunAt[id] = s.trueNow
	}
	s.healthyRun = false
	if cm, err := s.c.store.Load(checkpointKey(st.running.Source)); err == nil && id != "" {
		trial, _ := components.TrialFromAnnotations(cm.Annotations, components.DefaultTrial())
		s.thresholds[id] = trial.CrashLoopThreshold
		payload := cm.Data[nodeapi.PayloadKeyOf(st.running.Source, "config")]
		s.crashy[id] = strings.Contains(payload, "name: crash")
	}
}

func checkpointKey(src *corev1.NodeConfigSource) checkpoint.Key {
	k, _ := checkpoint.KeyFromSource(src)
	return k
}

// checkCrashLoopCount: a crash-looping config whose first run was in this
// restart loop is marked bad exactly when it ran threshold+1 times.
func (s *sim) checkCrashLoopCount(firstRuns map[string]bool, loopRuns map[string]int) {
	st := s.c.snapshot()
	if st.decision.Problem != lkg.ProblemCrashLoop {
		return
	}
	id := lkg.Key(st.current.Source)
	if !firstRuns[id] {
		return
	}
	// The first run was in this loop, so every run that counts is too. The
	// start that marks it runs the rollback target, not id.
	if want := s.thresholds[id] + 1; loopRuns[id] != want {
		s.fatalf("%s marked as crash-looping after %d runs; threshold %d wants %d", id, loopRuns[id], s.thresholds[id], want)
	}
}

func (s *sim) stop() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// crash ends the process without any cleanup and starts it again.
func (s *sim) crash() {
	s.stop()
	s.advance(time.Second)
	s.start()
}

// sync is what Run does on a change notification.
func (s *sim) sync() {
	if s.c == nil {
		return
	}
	before := lkg.Key(s.c.snapshot().running.Source)
	s.reloads = nil
	err := s.c.sync(s.n.ctx())
	switch {
	case errors.Is(err, errRestarted) || s.restarted:
		s.logf("  restart to apply")
		s.stop()
		s.start()
		return
	case err != nil:
		s.fatalf("sync: %v", err)
	}
	st := s.c.snapshot()
	s.checkRefusedReload(st)
	if after := lkg.Key(st.running.Source); after != before {
		s.logf("  reloaded %s", idOrLocal(after))
		s.startedRun()
		if s.crashy[after] || s.broken {
			s.logf("  crash after the reload")
			s.crash()
		}
	}
}

// checkRefusedReload: a config the component refused to apply in process
// (its Reload returned an error) is marked bad and does not run (DESIGN,
// turn 2: failed to apply current).
func (s *sim) checkRefusedReload(st state) {
	if len(s.reloads) == 0 || !s.reloads[0].refused {
		return
	}
	s.logf("  reload of current refused")
	cur := st.current.Source
	if lkg.Same(st.running.Source, cur) {
		s.fatalf("the component refused to apply %s, which the Controller says runs", lkg.Key(cur))
	}
	snap, err := checkpoint.Inspect(s.n.stateDir)
	if err != nil {
		s.fatalf("Inspect: %v", err)
	}
	tr, _ := snap.Version("v1.0.0")
	if _, mark, ok := tr.BadMarks.Lookup(cur); !ok || !strings.Contains(mark.Reason, "failed to apply") {
		s.fatalf("the component refused to apply %s: bad mark %+v (%v), want one saying failed to apply", lkg.Key(cur), mark, ok)
	}
}

// advance lets d pass, on the node's clock and the model's.
func (s *sim) advance(d time.Duration) {
	s.n.clock.Step(d)
	s.trueNow += d
}

// wake is what Run does first when it wakes: record a confirmation, and
// revert current when its confirmation deadline passed (by a reload, or a
// restart). It reports whether the process still runs.
func (s *sim) wake() bool {
	before := lkg.Key(s.c.snapshot().running.Source)
	s.reloads = nil
	_, err := s.c.confirmStep(s.n.ctx())
	switch {
	case errors.Is(err, errRestarted) || s.restarted:
		s.logf("  not confirmed in time: restart")
		s.stop()
		s.start()
		return false
	case err != nil:
		s.fatalf("confirmStep: %v", err)
	}
	if after := lkg.Key(s.c.snapshot().running.Source); after != before {
		s.logf("  not confirmed in time: reloaded %s", idOrLocal(after))
		s.startedRun()
		if s.crashy[after] || s.broken {
			s.logf("  crash after the reload")
			s.crash()
			return false
		}
	}
	return true
}

// promote is what Run does when its trial timer, its confirmation timer
// or MarkHealthy fires.
func (s *sim) promote() {
	if s.c == nil || !s.wake() || s.c == nil {
		return
	}
	for i := 0; i < 3; i++ {
		pv := s.c.promotion()
		if !pv.Promote {
			return
		}
		st := s.c.snapshot()
		id := lkg.Key(st.current.Source)
		if s.n.clock.Since(s.runStart) < modelTrial || (s.requireHealthy && !s.healthyRun) {
			s.fatalf("promotion of %s due after %v of uptime (healthy %v)", id, s.n.clock.Since(s.runStart), s.healthyRun)
		}
		s.c.promote(s.n.ctx())
		s.logf("  promoted %s", id)
	}
}

// check verifies the invariants against the state dir and the condition.
func (s *sim) check() {
	s.t.Helper()
	if s.c == nil {
		return
	}
	snap, err := checkpoint.Inspect(s.n.stateDir)
	if err != nil {
		s.fatalf("Inspect: %v", err)
	}
	st := s.c.snapshot()
	running := st.running.Source
	id := lkg.Key(running)

	// The state dir verifies (a damaged file was moved aside by the start
	// that followed the damage). A damaged pointer stays missing until a
	// valid one is written (current by the next sync, last-known-good by the
	// next promotion or reset): until then nothing is garbage-collected.
	for i, p := range []checkpoint.PointerState{snap.Current, snap.LastKnownGood} {
		if p.Err != nil && s.pointerDamaged[i] && errors.Is(p.Err, checkpoint.ErrCorrupt) {
			continue
		}
		s.pointerDamaged[i] = false
		if p.Err != nil {
			s.fatalf("pointer unreadable after the state was repaired: %v", p.Err)
		}
		if k, ok := checkpoint.KeyFromSource(p.Pointer.Source); ok {
			if c, ok := snap.Checkpoint(k); !ok || c.Err != nil {
				s.fatalf("pointer references checkpoint %s: present %v, %v", k, ok, c.Err)
			}
		}
	}
	for _, c := range snap.Checkpoints {
		if c.Err != nil {
			s.fatalf("checkpoint %s: %v", c.Key, c.Err)
		}
	}
	if len(snap.Problems) > 0 {
		s.fatalf("state dir problems: %v", snap.Problems)
	}
	tr, _ := snap.Version("v1.0.0")
	if tr.BadMarksErr != nil || tr.StartupsErr != nil {
		s.fatalf("tracking files: %v, %v", tr.BadMarksErr, tr.StartupsErr)
	}
	s.damaged = false

	cur, lastKnownGood := snap.Current.Pointer.Source, snap.LastKnownGood.Pointer.Source
	curKnown := snap.Current.Err == nil
	// A bad-marked config never runs.
	if key, mark, ok := tr.BadMarks.Lookup(running); ok {
		s.fatalf("running %s, which is marked bad (%s: %s)", id, key, mark.Reason)
	}
	// What runs is current, last-known-good or local.
	if running != nil && curKnown && !lkg.Same(running, cur) && !lkg.Same(running, lastKnownGood) {
		s.fatalf("running %s, neither current %s nor last-known-good %s", id, lkg.Key(cur), lkg.Key(lastKnownGood))
	}
	// A config that fails validation never runs.
	if s.invalidConfig(running) {
		s.fatalf("running invalid config %s", id)
	}
	// Promotion only after a full trial in this process.
	if l := lkg.Key(lastKnownGood); l != s.lastLKG {
		if l != "" && (l != id || s.n.clock.Since(s.runStart) < modelTrial || (s.requireHealthy && !s.healthyRun)) {
			s.fatalf("%s became last-known-good without a full trial in this run (running %s for %v, healthy %v)",
				l, id, s.n.clock.Since(s.runStart), s.healthyRun)
		}
		s.lastLKG = l
	}
	s.checkConfirmDeadline(st, tr, snap.Current, lastKnownGood)
	// ConfigOK says what runs.
	r := s.n.reporter.last()
	switch {
	case running != nil && curKnown && lkg.Same(running, cur) && !st.decision.UsingLastKnownGood:
		if r.Message != status.CurrentMessage(status.Ref{UID: running.ConfigMap.UID}, status.LocalDefault) ||
			(r.Status != corev1.ConditionTrue && r.Status != corev1.ConditionUnknown) {
			s.fatalf("running current %s, condition %+v", id, r)
		}
	case running == nil && curKnown && cur == nil:
		// Local as current; a startup whose sync failed says it runs the
		// rollback target (local too), as the seed words it.
		if r.Message != "using current (default)" && !(r.Status == corev1.ConditionUnknown && r.Message == "using last-known-good (default)") {
			s.fatalf("running local as current, condition %+v", r)
		}
	default:
		want := status.LastKnownGoodMessage(status.Ref{UID: uidOf(running)}, status.LocalDefault)
		if r.Message != want || r.Status == corev1.ConditionTrue {
			s.fatalf("running the rollback target %s (current %s), condition %+v; want %q, not True", idOrLocal(id), lkg.Key(cur), r, want)
		}
	}
	// The published ConfigStatus says what runs, what is assigned and
	// where the node stands, in the same report as the condition.
	cs := s.n.reporter.lastConfig()
	if cs == nil {
		s.fatalf("no ConfigStatus published with condition %+v", r)
	}
	if !lkg.Same(cs.Active, running) {
		s.fatalf("ConfigStatus active %s, running %s", lkg.Key(cs.Active), idOrLocal(id))
	}
	if (r.Status == corev1.ConditionTrue) != (cs.Error == "") {
		s.fatalf("ConfigStatus error %q with condition %+v", cs.Error, r)
	}
	if !curKnown {
		return
	}
	if !lkg.Same(cs.Assigned, cur) || !lkg.Same(cs.LastKnownGood, lastKnownGood) {
		s.fatalf("ConfigStatus assigned %s, last-known-good %s; state dir: current %s, last-known-good %s",
			lkg.Key(cs.Assigned), lkg.Key(cs.LastKnownGood), lkg.Key(cur), lkg.Key(lastKnownGood))
	}
	var want nodeapi.ConfigPhase
	switch {
	case cur == nil:
		want = nodeapi.PhaseLocal
	case !lkg.Same(running, cur):
		want = nodeapi.PhaseRolledBack
		switch {
		case st.decision.DeadEnd:
			want = nodeapi.PhaseDeadEnd
		case st.decision.Problem == lkg.ProblemSyncFailed:
			// No verdict on current: the condition says the desired
			// config is unclear (issue 24).
			want = nodeapi.PhaseSyncFailed
			if r.Status != corev1.ConditionUnknown {
				s.fatalf("phase SyncFailed with condition %+v, want Unknown", r)
			}
		}
	case lkg.Same(cur, lastKnownGood):
		want = nodeapi.PhasePromoted
	default:
		want = nodeapi.PhaseTrial
	}
	if cs.Phase != want {
		s.fatalf("ConfigStatus phase %s, want %s (running %s, current %s, last-known-good %s)",
			cs.Phase, want, idOrLocal(id), lkg.Key(cur), lkg.Key(lastKnownGood))
	}
}

func (s *sim) invalidConfig(src *corev1.NodeConfigSource) bool {
	if src == nil {
		return false
	}
	cm, err := s.c.store.Load(checkpointKey(src))
	if err != nil {
		return false
	}
	return strings.Contains(cm.Data[nodeapi.PayloadKeyOf(src, "config")], "value: -1")
}

// checkConfirmDeadline: with ConfirmWithin, an unconfirmed config on trial
// does not run past its deadline (in time that passed, ConfirmWithin more
// per step back of the node's clock since its first run), and a
// NotConfirmed mark is never early nor made after a confirmation.
func (s *sim) checkConfirmDeadline(st state, tr checkpoint.TrackingState, curState checkpoint.PointerState, lastKnownGood *corev1.NodeConfigSource) {
	cur := curState.Pointer.Source
	// A confirmation is durable as soon as Run woke on it: the record on
	// disk confirms current's run.
	if id := lkg.Key(cur); s.confirmWithin > 0 && curState.Err == nil && s.confirmed[id] && !s.uncertain[id] && !lkg.Same(cur, lastKnownGood) {
		rec, err := checkpoint.InspectConfirmation(s.n.stateDir)
		if err != nil || !rec.For(curState.Pointer) || rec.Confirmed.IsZero() {
			s.fatalf("%s was confirmed, but the record says %+v (%v)", id, rec, err)
		}
	}
	for key, mark := range tr.BadMarks {
		if mark.Problem != lkg.ProblemNotConfirmed.String() || s.notConfirmed[key] || s.uncertain[key] {
			continue
		}
		s.notConfirmed[key] = true
		fr, ran := s.firstRunAt[key]
		switch {
		case s.confirmWithin <= 0:
			s.fatalf("%s marked not confirmed without a deadline", key)
		case s.confirmed[key]:
			s.fatalf("%s marked not confirmed after a confirmation", key)
		case ran && s.trueNow-fr < s.confirmWithin:
			s.fatalf("%s marked not confirmed %v after its first run, before the deadline %v", key, s.trueNow-fr, s.confirmWithin)
		}
	}
	running := st.running.Source
	id := lkg.Key(running)
	if s.confirmWithin <= 0 || id == "" || !lkg.Same(running, cur) || lkg.Same(cur, lastKnownGood) || s.confirmed[id] || s.uncertain[id] {
		return
	}
	fr, ok := s.firstRunAt[id]
	if !ok {
		return
	}
	allowed := s.confirmWithin
	for _, at := range s.stepBacks {
		if at >= fr {
			allowed += s.confirmWithin
		}
	}
	if s.trueNow-fr >= allowed {
		s.fatalf("%s runs unconfirmed %v after its first run; deadline %v (%v with the clock's steps back)", id, s.trueNow-fr, s.confirmWithin, allowed)
	}
}
