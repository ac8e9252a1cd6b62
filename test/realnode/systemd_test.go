//go:build linux

package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/cluster/ports"
	schedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/dynconfig/dynconfig/internal/testenv"
	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/status"
	"github.com/dynconfig/dynconfig/test/cluster"
)

// systemdBin is the system manager the test boots.
const systemdBin = "/lib/systemd/systemd"

// TestStockKubeletUnderSystemd runs the stock kubelet and dynconfig's run
// role under REAL systemd, with the unit files of deploy/kubelet as
// systemd reads them: a kubeadm-like kubelet.service, the checked-in
// 20-dynconfig.conf and dynconfig-kubelet.service unchanged, and test
// drop-ins that override only what an operator would (RestartSec, the
// kubelet's healthz port, logs). The run role restarts the kubelet through
// systemd's D-Bus API. systemd runs as PID 1 of its own PID, mount and UTS
// namespaces (systemdNode has the layout), with containerd as a unit
// beside the kubelet. In order: stock start; a good config; a config the
// kubelet refuses at start, crash-looping under Restart=always; a power cut
// in the middle of a crash loop and a boot with the API server down.
func TestStockKubeletUnderSystemd(t *testing.T) {
	kubeletBin := requirements(t)
	systemdRequirements(t)
	began := time.Now()
	cl := cluster.StartWithOptions(t, cluster.Options{NodeAuthorization: true})
	ctx := context.Background()
	if _, err := cl.ApplyManifests(ctx, filepath.Join("..", "..", "deploy", "config-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	n := newSystemdNode(t, cl, kubeletBin)

	// 1. Stock start: systemd starts containerd, the kubelet (pre-start
	// role first) and the run role. No assignment, no drop-in.
	t0 := time.Now()
	n.boot("dctest.target")
	n.waitContainerd()
	n.importImages()
	n.eventually("Node Ready on the local config", n.ready(110, t0))
	t.Logf("stock start: Node Ready %v after booting systemd", time.Since(t0).Round(time.Millisecond))
	n.eventually("ConfigOK True on the local config", n.configOK(corev1.ConditionTrue, "init", ""))
	if st := n.starts(); len(st) != 1 || st[0].dropIn != "" {
		t.Fatalf("stock start: %d kubelet starts, want 1 without a drop-in\n%s", len(st), n.more())
	}
	if got := n.show("dynconfig-kubelet.service", "ActiveState"); got != "active" {
		t.Fatalf("dynconfig-kubelet.service is %q, want active\n%s", got, n.more())
	}
	runRole := n.show("dynconfig-kubelet.service", "MainPID")
	n.sandboxed(runRole)
	pod := n.runPod(cl.Client, "web")
	containerID := pod.Status.ContainerStatuses[0].ContainerID

	// 2. A good config: the run role asks systemd over D-Bus to restart
	// kubelet.service; systemd runs the pre-start role and the kubelet once.
	// NRestarts counts only the restarts of Restart=, so it stays.
	autoRestarts := n.nRestarts()
	good := n.configMap("maxpods-50", "maxPods: 50\n", trial, threshold)
	t1 := time.Now()
	n.assign(good)
	n.eventually("Node Ready with capacity 50", n.ready(50, t1))
	t.Logf("good config: Node Ready with maxPods 50 %v after the assignment", time.Since(t1).Round(time.Millisecond))
	n.eventually("ConfigOK True on the good config", n.configOK(corev1.ConditionTrue, string(good.UID), ""))
	n.eventually("the good config promoted", n.phase(nodeapi.PhasePromoted, good))
	t.Logf("good config promoted %v after the assignment (trial %s)", time.Since(t1).Round(time.Millisecond), trial)
	if st := n.starts(); len(st) != 2 || !strings.Contains(st[1].dropIn, "maxPods: 50") || st[0].invocation == st[1].invocation {
		t.Fatalf("good config: %d kubelet starts, want 2 (one restart), the second on the drop-in\n%s", len(st), n.more())
	}
	if got := n.nRestarts(); got != autoRestarts {
		t.Fatalf("good config: NRestarts %d, was %d: the restart was not the run role's job\n%s", got, autoRestarts, n.more())
	}
	if got := n.show("dynconfig-kubelet.service", "MainPID"); got != runRole {
		t.Fatalf("the run role restarted itself (MainPID %s, was %s)\n%s", got, runRole, n.more())
	}
	n.podUntouched("web", containerID)
	n.lastKnownGoodIs(good)

	// 3. A config our validation accepts that the real kubelet refuses at
	// start, on cgroup v1 and v2 hosts alike (refusedConfig): systemd's
	// Restart=always starts it threshold+1 times, then the pre-start role
	// rolls back.
	refused := n.configMap("cpus-offline", "maxPods: 40\n"+refusedConfig, trial, threshold)
	n.crashLoopUnderSystemd(refused, good)
	n.podUntouched("web", containerID)

	// 4. A power cut in the middle of a crash loop, then a boot with the
	// API server down and without the run role: the pre-start role alone
	// counts the starts across the reboot and puts last-known-good back.
	rebootBad := n.configMap("reboot-bad", "maxPods: 30\n"+refusedConfig, trial, threshold)
	before := len(n.starts())
	n.assign(rebootBad)
	// Cut as soon as a start on it is recorded (the recorder runs after the
	// pre-start role): polled every 10ms, well inside RestartSec.
	deadline := time.Now().Add(waitTimeout)
	for {
		st := n.starts()
		if len(st) > before && strings.Contains(st[len(st)-1].dropIn, "maxPods: 30") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start on %s\n%s", rebootBad.Name, n.more())
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.powerCut()
	if err := os.RemoveAll(filepath.Join(n.dir, "containerd-state")); err != nil {
		t.Fatal(err)
	}
	if err := cl.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	before = len(n.starts())
	t.Log("reboot: systemd's namespaces killed, runtime state wiped, API server stopped")
	n.boot("dctest-offline.target")
	n.offlineRollback(threshold, func() []string { return dropInsOf(n.starts()[before:], func(s sdStart) string { return s.dropIn }) })
	if err := cl.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	if out, err := n.systemctl("start", "dynconfig-kubelet.service"); err != nil {
		t.Fatalf("systemctl start dynconfig-kubelet.service: %v: %s", err, out)
	}
	n.eventually("Node Ready on last-known-good after the reboot", n.ready(50, t2))
	n.eventually("ConfigOK False after the reboot", n.configOK(corev1.ConditionFalse, string(good.UID), status.CrashLoopReason(rebootBad.UID)))
	n.eventually("pod web Running again after the reboot", func() (bool, string) {
		pod, err := cl.Client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podRunning(pod), string(pod.Status.Phase)
	})
	if got := len(n.starts()[before:]); got != threshold+1 {
		t.Fatalf("the run role restarted the kubelet after the reboot: %d starts, want %d\n%s", got, threshold+1, n.more())
	}
	t.Logf("realnode under systemd: whole test %v", time.Since(began).Round(time.Second))
}

// crashLoopUnderSystemd assigns bad, which the kubelet refuses at start
// (refusedLog), and checks that systemd started the kubelet on it exactly
// threshold+1 times, each an automatic restart of Restart=always after a
// failed exit, and then once on last-known-good, the Node Ready again and
// ConfigOK False.
func (n *systemdNode) crashLoopUnderSystemd(bad, lastKnownGood *corev1.ConfigMap) {
	t := n.t
	t.Helper()
	before := len(n.starts())
	refusals := strings.Count(n.kubeletLog(), refusedLog)
	t0 := time.Now()
	n.assign(bad)
	n.eventually("rollback of "+bad.Name, func() (bool, string) {
		st := n.starts()
		if len(st) <= before+threshold+1 {
			return false, fmt.Sprintf("%d starts on it so far", len(st)-before)
		}
		return strings.Contains(st[len(st)-1].dropIn, "maxPods: 50"), "last start: " + st[len(st)-1].dropIn
	})
	// The restart that began the loop was the run role's; each of the next
	// ones was systemd's, after the kubelet exited.
	autoRestarts := n.nRestarts()
	n.eventually("Node Ready on last-known-good", n.ready(50, time.Now()))
	t.Logf("%s: rolled back by the pre-start role, Node Ready again %v after the assignment", bad.Name, time.Since(t0).Round(time.Millisecond))
	st := n.starts()[before:]
	if len(st) != threshold+2 {
		t.Fatalf("%s: %d starts, want %d: threshold+1 on it, then one on last-known-good\n%s", bad.Name, len(st), threshold+2, n.more())
	}
	for i, s := range st[:threshold+1] {
		if !strings.Contains(s.dropIn, string(bad.UID)) {
			t.Fatalf("%s: start %d ran %q, want the bad config", bad.Name, i, s.dropIn)
		}
	}
	last := st[threshold+1]
	if !strings.Contains(last.dropIn, string(lastKnownGood.UID)) || !strings.Contains(last.dropIn, "(last-known-good)") {
		t.Fatalf("%s: the rollback start ran %q, want last-known-good", bad.Name, last.dropIn)
	}
	if got := strings.Count(n.kubeletLog(), refusedLog) - refusals; got < threshold+1 {
		t.Fatalf("%s: the kubelet's log says %q %d times since the assignment, want at least %d\n%s", bad.Name, refusedLog, got, threshold+1, n.more())
	}
	if autoRestarts != threshold+1 {
		t.Fatalf("%s: systemd's NRestarts is %d, want %d automatic restarts after the kubelet's exits\n%s", bad.Name, autoRestarts, threshold+1, n.more())
	}
	n.eventually("ConfigOK False for "+bad.Name, n.configOK(corev1.ConditionFalse, string(lastKnownGood.UID), status.CrashLoopReason(bad.UID)))
}

// sandboxed checks that the run role (pid, in systemd's PID namespace)
// runs in the sandbox of the checked-in dynconfig-kubelet.service:
// NoNewPrivileges=, RestrictAddressFamilies= (a seccomp filter), the empty
// CapabilityBoundingSet=, ProtectSystem=strict with its StateDirectory=
// writable, PrivateTmp=.
func (n *systemdNode) sandboxed(pid string) {
	t := n.t
	t.Helper()
	read := func(file string) string {
		out, err := exec.Command("nsenter", "-t", strconv.Itoa(n.pid), "-m", "-p", "--", "cat", "/proc/"+pid+"/"+file).Output()
		if err != nil {
			t.Fatalf("the run role's /proc/%s/%s: %v", pid, file, err)
		}
		return string(out)
	}
	st := read("status")
	for _, want := range []string{"NoNewPrivs:\t1\n", "Seccomp:\t2\n", "CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n"} {
		if !strings.Contains(st, want) {
			t.Errorf("the run role's status lacks %q:\n%s", want, st)
		}
	}
	// The last mount at a path is the one the run role sees.
	mounts := map[string][]string{}
	for _, line := range strings.Split(read("mountinfo"), "\n") {
		if f := strings.Fields(line); len(f) > 5 {
			mounts[f[4]] = f
		}
	}
	opts := func(path string) string {
		if f := mounts[path]; f != nil {
			return "," + f[5] + ","
		}
		return ""
	}
	if !strings.Contains(opts("/"), ",ro,") || !strings.Contains(opts("/etc"), ",ro,") {
		t.Errorf("ProtectSystem=strict: / is %q and /etc %q, want read-only", opts("/"), opts("/etc"))
	}
	if !strings.Contains(opts("/var/lib/dynconfig/kubelet"), ",rw,") {
		t.Errorf("StateDirectory=: /var/lib/dynconfig/kubelet is %q, want writable", opts("/var/lib/dynconfig/kubelet"))
	}
	if f := mounts["/tmp"]; f == nil || !strings.Contains(f[3], "systemd-private-") {
		t.Errorf("PrivateTmp=: /tmp is %v", f)
	}
	// PrivateDevices=, ProtectKernelTunables=, ProtectControlGroups=.
	if f := mounts["/dev"]; f == nil || f[len(f)-3] != "tmpfs" {
		t.Errorf("PrivateDevices=: /dev is %v, want a tmpfs of its own", f)
	}
	for _, p := range []string{"/proc/sys", "/sys/fs/cgroup"} {
		if !strings.Contains(opts(p), ",ro,") {
			t.Errorf("%s is %q, want read-only", p, opts(p))
		}
	}
	// And systemd read every directive as the unit file says: a misspelt
	// key is only a warning in systemd's log.
	want := map[string]string{}
	for _, line := range strings.Split(n.checkedIn("dynconfig-kubelet.service"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && (strings.HasPrefix(k, "Protect") || strings.HasPrefix(k, "Private") || strings.HasPrefix(k, "Restrict") ||
			strings.HasPrefix(k, "StateDirectory") || k == "NoNewPrivileges" || k == "CapabilityBoundingSet") {
			want[k] = v
		}
	}
	if len(want) < 10 {
		t.Errorf("dynconfig-kubelet.service: only %d sandboxing directives found: %v", len(want), want)
	}
	for k, v := range want {
		got := n.show("dynconfig-kubelet.service", k)
		if k == "RestrictAddressFamilies" { // a set
			g, w := strings.Fields(got), strings.Fields(v)
			sort.Strings(g)
			sort.Strings(w)
			got, v = strings.Join(g, " "), strings.Join(w, " ")
		}
		if got != v {
			t.Errorf("systemd reads %s=%q, the unit says %q", k, got, v)
		}
	}
	// 20-dynconfig.conf: no start limit for a crash-looping kubelet.
	if got := n.show("kubelet.service", "StartLimitIntervalUSec"); got != "0" {
		t.Errorf("kubelet.service: StartLimitIntervalUSec=%q, want 0 (20-dynconfig.conf)", got)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// systemdRequirements skips the test (fails it in CI: testenv.Missing),
// saying why, when this machine cannot boot systemd in namespaces of its
// own.
func systemdRequirements(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemdBin); err != nil {
		testenv.Missing(t, systemdBin, "apt-get install systemd")
	}
	for _, bin := range []string{"unshare", "nsenter", "systemctl"} {
		testenv.LookPath(t, bin, "apt-get install util-linux systemd")
	}
	if fs, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(fs), "\toverlay\n") {
		testenv.Missing(t, "the kernel's overlay file system (the test overlays /etc and /usr in its mount namespace)", "a kernel with overlayfs (modprobe overlay)")
	}
}

// systemdNode is a realNode whose kubelet, run role and containerd are
// units of a real systemd. systemd runs as PID 1 of new PID, mount and UTS
// namespaces (the host name is the Node's name, the run role's default
// --node-name). In the mount namespace the units' canonical paths are real
// and the host's are untouched:
//
//	/run, /tmp, /var/tmp, /var/log, /var/lib   tmpfs (the node's dir is bound back at its path)
//	/var/lib/kubelet                           dir/var-lib-kubelet (config.yaml, the kubelet's root dir)
//	/var/lib/dynconfig                         dir/var-lib-dynconfig (the state dir persists across boots)
//	/etc                                       overlay, upper dir/etc/upper (kubernetes/, systemd/system.conf)
//	/etc/systemd/system                        dir/units (the only unit path: SYSTEMD_UNIT_PATH)
//	/usr                                       overlay, upper dir/usr/upper (bin/kubelet, local/bin/dynconfig-kubelet)
//	/dev/console                               dir/console, a file: systemd (PID 1) makes the
//	                                           console its terminal, and finds none (its log is lost)
//
// systemd's cgroups live under one cgroup of the test's (cgroupDirs).
type systemdNode struct {
	*realNode
	units, startsDir, console, kubeletLogPath string
	// cgroupDirs are the levels of systemd's root cgroup that did not exist
	// before the test, in any hierarchy: shutdown removes them.
	cgroupDirs []string
	joins      []string // the cgroup.procs the boot script joins

	unshare *exec.Cmd
	ended   chan struct{} // closed when unshare has exited
	pid     int           // systemd's, as the host sees it
	pidNS   string
}

func newSystemdNode(t *testing.T, cl *cluster.Cluster, kubeletBin string) *systemdNode {
	t.Helper()
	n := &systemdNode{realNode: newRealNode(t, cl, kubeletBin)}
	d := n.dir
	n.units = filepath.Join(d, "units")
	n.startsDir = filepath.Join(d, "starts")
	n.console = filepath.Join(d, "console")
	n.kubeletLogPath = filepath.Join(d, "kubelet.log")
	n.followLog = filepath.Join(d, "follow.log")
	n.describe = n.describeSystemd
	// The canonical paths, as the host sees them.
	etc := filepath.Join(d, "etc", "upper")
	oldKubeconfig, oldConfig := n.kubeconfig, n.baseConfig
	n.kubeconfig = filepath.Join(etc, "kubernetes", "kubelet.conf")
	n.confDir = filepath.Join(etc, "kubernetes", "kubelet.conf.d")
	n.rootDir = filepath.Join(d, "var-lib-kubelet")
	n.baseConfig = filepath.Join(n.rootDir, "config.yaml")
	n.stateDir = filepath.Join(d, "var-lib-dynconfig", "kubelet")
	for _, dir := range []string{n.confDir, n.rootDir, filepath.Dir(n.stateDir), n.units, n.startsDir,
		filepath.Join(d, "etc", "work"), filepath.Join(etc, "systemd"), filepath.Join(d, "usr", "work"),
		filepath.Join(d, "usr", "upper", "bin"), filepath.Join(d, "usr", "upper", "local", "bin")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for from, to := range map[string]string{oldKubeconfig: n.kubeconfig, oldConfig: n.baseConfig} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	n.write(n.console, "")
	// kubeadm join writes this; the deb's 10-kubeadm.conf reads it.
	n.write(filepath.Join(n.rootDir, "kubeadm-flags.env"), "KUBELET_KUBEADM_ARGS=\"--v=1\"\n")
	n.write(filepath.Join(etc, "hostname"), n.name+"\n")
	// No accounting: systemd then moves processes in no v1 hierarchy but its
	// own (and devices, for PrivateDevices=), leaving the others where the
	// test runs.
	n.write(filepath.Join(etc, "systemd", "system.conf"), `[Manager]
DefaultCPUAccounting=no
DefaultIOAccounting=no
DefaultBlockIOAccounting=no
DefaultMemoryAccounting=no
DefaultTasksAccounting=no
DefaultIPAccounting=no
`)
	realKubelet, err := filepath.EvalSymlinks(kubeletBin)
	if err != nil {
		t.Fatal(err)
	}
	realKubelet, _ = filepath.Abs(realKubelet)
	n.place(realKubelet, filepath.Join(d, "usr", "upper", "bin", "kubelet"))
	n.place(n.dynBin, filepath.Join(d, "usr", "upper", "local", "bin", "dynconfig-kubelet"))
	n.writeUnits()
	n.cgroups()
	t.Cleanup(n.shutdown) // before realNode's cleanup (the bridge, kubepods, the dir)
	return n
}

// place hard-links the binary from into the /usr overlay (the run role's
// PrivateTmp hides the node's dir under /tmp, so no symlink into it), or
// symlinks it when it is on another file system.
func (n *systemdNode) place(from, to string) {
	if err := os.Link(from, to); err == nil {
		return
	}
	if err := os.Symlink(from, to); err != nil {
		n.t.Fatal(err)
	}
}

// unitLine returns directive's value in the checked-in unit file
// deploy/kubelet/FILE, continuation lines joined.
func (n *systemdNode) unitLine(file, directive string) string {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubelet", file))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		if v, ok := strings.CutPrefix(line, directive); ok && strings.TrimSpace(v) != "" {
			if strings.Contains(v, "--restart-command") {
				n.t.Fatalf("%s: %s restarts the kubelet with --restart-command, not over D-Bus", file, directive)
			}
			return strings.TrimSpace(v)
		}
	}
	n.t.Fatalf("%s: no %s line", file, directive)
	return ""
}

func (n *systemdNode) checkedIn(file string) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubelet", file))
	if err != nil {
		n.t.Fatal(err)
	}
	return string(data)
}

// writeUnits writes the only unit path systemd reads: the deb's
// kubelet.service and kubeadm's 10-kubeadm.conf, the checked-in
// 20-dynconfig.conf and dynconfig-kubelet.service unchanged, the test's
// drop-ins, a containerd.service of the test's own, and the few targets
// the units name.
func (n *systemdNode) writeUnits() {
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		n.t.Fatal(err)
	}
	d := n.dir
	files := map[string]string{
		// As the kubernetes deb ships them.
		"kubelet.service": `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`,
		"kubelet.service.d/10-kubeadm.conf": `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`,
		"kubelet.service.d/20-dynconfig.conf": n.checkedIn("20-dynconfig.conf"),
		// The operator's override: a short RestartSec. And the test's
		// recorder, after the pre-start role: one file per start, the
		// start's invocation ID and dynconfig's drop-in as the kubelet
		// reads it.
		"kubelet.service.d/30-test.conf": `[Service]
RestartSec=1
ExecStartPre=/bin/sh -c 'f=STARTS/$$(date +%%s%%N); { echo "$$INVOCATION_ID"; cat /etc/kubernetes/kubelet.conf.d/99-dynconfig.conf 2>/dev/null || :; } > $$f.tmp && mv $$f.tmp $$f'
StandardOutput=append:DIR/kubelet.log
StandardError=inherit
`,
		"dynconfig-kubelet.service": n.checkedIn("dynconfig-kubelet.service"),
		// The checked-in command line, with the kubelet's healthz and a
		// metrics port of the test's (a shared machine), and faster polls.
		"dynconfig-kubelet.service.d/30-test.conf": fmt.Sprintf(`[Service]
ExecStart=
ExecStart=%s --kubelet-healthz-url=http://127.0.0.1:%d/healthz --metrics-address=127.0.0.1:%d --poll-interval=500ms --start-timeout=30s --v=2
RestartSec=1
StandardOutput=append:DIR/follow.log
StandardError=inherit
`, n.unitLine("dynconfig-kubelet.service", "ExecStart="), n.healthzPort, cluster.FreePort(n.t)),
		"containerd.service": fmt.Sprintf(`[Unit]
Description=containerd of the dynconfig test
Before=kubelet.service

[Service]
Type=notify
ExecStart=%s --config %s
StandardOutput=append:DIR/containerd.log
StandardError=inherit
`, containerd, n.containerdConfig()),
		"dctest.target": `[Unit]
Description=dynconfig test: boot
DefaultDependencies=no
Wants=containerd.service kubelet.service dynconfig-kubelet.service
`,
		"dctest-offline.target": `[Unit]
Description=dynconfig test: boot without the run role
DefaultDependencies=no
Wants=containerd.service kubelet.service
`,
	}
	for _, target := range []string{"sysinit", "basic", "shutdown", "network", "network-online", "multi-user"} {
		files[target+".target"] = "[Unit]\nDescription=" + target + " (empty in the test)\nDefaultDependencies=no\n"
	}
	r := strings.NewReplacer("STARTS", n.startsDir, "DIR", d)
	for name, data := range files {
		if name != "kubelet.service.d/20-dynconfig.conf" && name != "dynconfig-kubelet.service" {
			data = r.Replace(data)
		}
		n.write(filepath.Join(n.units, name), data)
	}
}

// cgroups prepares the cgroup systemd's tree lives in: systemd takes the
// cgroup it starts in (name=systemd) as its root and uses that path in
// every hierarchy it touches (the devices hierarchy too, for
// PrivateDevices=). It is a new child of the deepest cgroup the test runs
// in, joined in name=systemd, the unified hierarchy and every hierarchy the
// test runs at that path, so that no process leaves a cgroup the test's
// processes are in. Every level of it missing in any hierarchy now is
// removed by shutdown.
func (n *systemdNode) cgroups() {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		n.t.Fatal(err)
	}
	join := map[string]string{} // hierarchy dir -> the test's path in it
	base := "/"
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(f[1], "name="))
		if f[0] == "0" && f[1] == "" {
			dir = "/sys/fs/cgroup/unified"
			if _, err := os.Stat(dir); err != nil {
				dir = "/sys/fs/cgroup" // cgroup v2 only
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		join[dir] = f[2]
		if len(f[2]) > len(base) {
			base = f[2]
		}
	}
	root := filepath.Join(base, fmt.Sprintf("dynconfig-realnode-%d", os.Getpid()))
	hierarchies := globDirs("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		hierarchies = []string{"/sys/fs/cgroup"}
	}
	for _, h := range hierarchies {
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct links
		}
		for p := filepath.Join(h, root); p != h; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err == nil {
				break
			}
			n.cgroupDirs = append(n.cgroupDirs, p)
		}
	}
	for dir, path := range join {
		if path != base && dir != "/sys/fs/cgroup/systemd" && dir != "/sys/fs/cgroup/unified" && dir != "/sys/fs/cgroup" {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, root), 0o755); err != nil {
			n.t.Fatal(err)
		}
		n.joins = append(n.joins, filepath.Join(dir, root, "cgroup.procs"))
	}
}

// bootScript sets up the mount namespace and execs systemd (PID 1 of the
// new PID namespace) with the test's unit path only and no generators.
func (n *systemdNode) bootScript(target string) string {
	d := n.dir
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, j := range n.joins {
		fmt.Fprintf(&b, "echo 0 > %q\n", j)
	}
	fmt.Fprintf(&b, `D=%q
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir /run/dctest-node
mount --bind "$D" /run/dctest-node
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
mkdir -p "$D"
mount --move /run/dctest-node "$D"
rmdir /run/dctest-node
mount -t tmpfs -o mode=0755 tmpfs /var/log
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mkdir /var/lib/kubelet /var/lib/dynconfig
mount --bind "$D/var-lib-kubelet" /var/lib/kubelet
mount --bind "$D/var-lib-dynconfig" /var/lib/dynconfig
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$D/etc/upper,workdir=$D/etc/work" /etc
mkdir -p /etc/systemd/system
mount --bind "$D/units" /etc/systemd/system
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$D/usr/upper,workdir=$D/usr/work" /usr
if [ -e /dev/console ]; then mount --bind "$D/console" /dev/console; fi
echo %q > /proc/sys/kernel/hostname
exec env -i container=other SYSTEMD_UNIT_PATH=/etc/systemd/system SYSTEMD_GENERATOR_PATH=/run/no-generators \
  SYSTEMD_ENVIRONMENT_GENERATOR_PATH=/run/no-generators %s --system --unit=%s --show-status=no
`, d, n.name, systemdBin, target)
	return b.String()
}

// boot starts systemd in new namespaces with target as its start unit,
// and waits until it answers systemctl.
func (n *systemdNode) boot(target string) {
	t := n.t
	t.Helper()
	script := filepath.Join(n.dir, "boot.sh")
	n.write(script, n.bootScript(target))
	// --kill-child and the parent-death signal: systemd and everything in
	// its PID namespace die with the test, even when it is killed.
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount", "--mount-proc",
		"--propagation", "private", "--uts", "/bin/sh", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	f := logFile(t, n.console+".boot")
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	runtime.LockOSThread() // Pdeathsig follows the thread that forks
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	n.unshare = cmd
	n.ended = make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(n.ended) }()
	n.pid = 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n.pid == 0 {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			if f := strings.Fields(string(b)); len(f) > 0 {
				n.pid, _ = strconv.Atoi(f[0])
				n.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", n.pid))
			}
		}
		if n.pid != 0 {
			if out, err := n.systemctl("show", "--property=Version", "--value"); err == nil && strings.TrimSpace(out) != "" {
				break
			}
		}
		select {
		case <-n.ended:
			t.Fatalf("systemd's namespaces ended while booting: %v\n%s", waitErr, tail(n.console+".boot", 20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd did not answer within 30s\n%s", tail(n.console+".boot", 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// systemctl runs systemctl in systemd's namespaces.
func (n *systemdNode) systemctl(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.pid), "-m", "-p", "--", "systemctl", "--no-pager"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// show returns a property of unit.
func (n *systemdNode) show(unit, property string) string {
	out, err := n.systemctl("show", "--property="+property, "--value", unit)
	if err != nil {
		return fmt.Sprintf("(systemctl: %v: %s)", err, out)
	}
	return strings.TrimSpace(out)
}

// nRestarts is kubelet.service's NRestarts: its automatic restarts.
func (n *systemdNode) nRestarts() int {
	n.t.Helper()
	s := n.show("kubelet.service", "NRestarts")
	v, err := strconv.Atoi(s)
	if err != nil {
		n.t.Fatalf("kubelet.service NRestarts: %q", s)
	}
	return v
}

// sdStart is one start of kubelet.service, as the test's recorder saw it.
type sdStart struct {
	invocation string // systemd's invocation ID
	dropIn     string // dynconfig's drop-in ("" = none)
}

// starts lists kubelet.service's starts, across boots, in order.
func (n *systemdNode) starts() []sdStart {
	entries, _ := os.ReadDir(n.startsDir)
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var st []sdStart
	for _, name := range names {
		b, _ := os.ReadFile(filepath.Join(n.startsDir, name))
		id, dropIn, _ := strings.Cut(string(b), "\n")
		st = append(st, sdStart{invocation: id, dropIn: dropIn})
	}
	return st
}

func (n *systemdNode) kubeletLog() string {
	b, _ := os.ReadFile(n.kubeletLogPath)
	return string(b)
}

func (n *systemdNode) describeSystemd() string {
	var b strings.Builder
	for i, s := range n.starts() {
		fmt.Fprintf(&b, "kubelet start %d (invocation %s): drop-in %q\n", i, s.invocation, s.dropIn)
	}
	if n.pid != 0 {
		for _, u := range []string{"kubelet.service", "dynconfig-kubelet.service", "containerd.service"} {
			fmt.Fprintf(&b, "%s: %s\n", u, strings.ReplaceAll(n.show(u, "ActiveState,SubState,Result,NRestarts,MainPID,ExecMainStatus"), "\n", " "))
		}
	}
	fmt.Fprintf(&b, "kubelet.service log:\n%s\n", tail(n.kubeletLogPath, 25))
	return b.String()
}

// powerCut kills systemd, PID 1 of its namespace: the kernel kills every
// process in it (containers too), and the mounts go with the namespace.
func (n *systemdNode) powerCut() {
	if n.unshare == nil {
		return
	}
	n.t.Logf("power cut: the processes in systemd's PID namespace have used %.1f CPU-seconds since boot (with their waited-for children)", n.cpuSeconds())
	_ = syscall.Kill(n.pid, syscall.SIGKILL)
	select {
	case <-n.ended:
	case <-time.After(30 * time.Second):
		_ = n.unshare.Process.Kill()
		<-n.ended
	}
	n.unshare = nil
	// Wait until no process is left in the PID namespace.
	deadline := time.Now().Add(30 * time.Second)
	for n.inNamespace() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	n.pid = 0
}

// cpuSeconds sums utime, stime, cutime and cstime over the processes in
// systemd's PID namespace (not those of nested namespaces: the pods'): the
// CPU a test's rusage misses, as the kernel, not the test, reaps them at a
// power cut.
func (n *systemdNode) cpuSeconds() float64 {
	var ticks int64
	for _, pid := range n.namespacePIDs() {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// Fields after the ")" of comm: utime is the 12th, then stime,
		// cutime, cstime.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		for _, v := range f[11:15] {
			x, _ := strconv.ParseInt(v, 10, 64)
			ticks += x
		}
	}
	return float64(ticks) / 100 // USER_HZ
}

func (n *systemdNode) inNamespace() int { return len(n.namespacePIDs()) }

func (n *systemdNode) namespacePIDs() []string {
	if n.pidNS == "" {
		return nil
	}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	var pids []string
	for _, l := range links {
		if v, err := os.Readlink(l); err == nil && v == n.pidNS {
			pids = append(pids, filepath.Base(filepath.Dir(filepath.Dir(l))))
		}
	}
	return pids
}

// shutdown ends systemd's namespaces and removes the cgroups systemd and
// the test created (deepest first).
func (n *systemdNode) shutdown() {
	n.powerCut()
	// Deepest first: each hierarchy's levels were listed deepest first.
	for _, dir := range n.cgroupDirs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if strings.HasPrefix(filepath.Base(dir), "dynconfig-realnode-") {
				removeCgroup(dir) // systemd's tree
			} else {
				_ = os.Remove(dir) // a parent: only when empty
			}
			if _, err := os.Stat(dir); os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestRunRolePortsAreFree: the run role's --metrics-address in the
// checked-in dynconfig-kubelet.service is on no Kubernetes component's
// default port. It was kube-scheduler's 10259 (bound on 127.0.0.1 by
// kubeadm's control-plane nodes): whichever of the two started second
// could not serve, and a kube-scheduler that cannot bind exits.
func TestRunRolePortsAreFree(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubelet", "dynconfig-kubelet.service"))
	if err != nil {
		t.Fatal(err)
	}
	taken := map[int]string{
		ports.KubeletHealthzPort: "kubelet healthz", ports.ProxyStatusPort: "kube-proxy metrics", ports.KubeletPort: "kubelet",
		ports.KubeletReadOnlyPort: "kubelet read-only", ports.ProxyHealthzPort: "kube-proxy healthz",
		ports.KubeControllerManagerPort: "kube-controller-manager", ports.CloudControllerManagerPort: "cloud-controller-manager",
		ports.CloudControllerManagerWebhookPort: "cloud-controller-manager webhook", schedulerconfig.DefaultKubeSchedulerPort: "kube-scheduler",
	}
	found := false
	for _, f := range strings.Fields(strings.ReplaceAll(string(data), "\\\n", " ")) {
		v, ok := strings.CutPrefix(f, "--metrics-address=")
		if !ok {
			continue
		}
		found = true
		_, p, err := net.SplitHostPort(v)
		if err != nil {
			t.Fatalf("--metrics-address=%s: %v", v, err)
		}
		port, _ := strconv.Atoi(p)
		if who, ok := taken[port]; ok {
			t.Errorf("dynconfig-kubelet.service: --metrics-address=%s is the default port of the %s", v, who)
		}
	}
	if !found {
		t.Fatal("dynconfig-kubelet.service sets no --metrics-address")
	}
}
