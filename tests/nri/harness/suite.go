package harness

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// BaseEnv is the env of the fake containers (as containerd passes image + pod env).
var BaseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/root"}

// FullEnv is what a container with BaseEnv gets on a node with a staged topology.
var FullEnv = map[string]string{
	"PATH":                 MountPath + "/driver/usr/bin:/usr/bin:/bin",
	"LD_LIBRARY_PATH":      MountPath + "/driver/usr/lib64",
	"MOCK_NVML_CONFIG":     MountPath + "/driver/config/profile.bin",
	"NODE_NAME":            NodeName,
	"MOCK_TOPOLOGY_CONFIG": MountPath + "/driver/topology/topology.bin",
}

// Suite runs every case against the nri version the calling module pins.
func Suite(t *testing.T) {
	t.Run("RegistrationOverSocket", RegistrationOverSocket)
	t.Run("RegistrationOverFd3", RegistrationOverFd3)
	t.Run("SynchronizeWithExistingPods", SynchronizeWithExistingPods)
	t.Run("SplitSynchronize", SplitSynchronize)
	t.Run("CreateContainer", CreateContainerCases)
	t.Run("LargeAdjustment2048Channels", LargeAdjustment)
	t.Run("StalledPluginIsDropped", StalledPluginIsDropped)
	t.Run("RuntimeGoesAway", RuntimeGoesAway)
	t.Run("NotReadyBeforeRegistration", NotReadyBeforeRegistration)
}

// NotReadyBeforeRegistration: connected to a socket that never answers, the plugin is
// live but not ready (the readiness probe makes a plugin that injects nothing visible).
func NotReadyBeforeRegistration(t *testing.T) {
	tr := StageTree(t, 1)
	socket := filepath.Join(ShortTempDir(t, "nri-"), "nri.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if conn, err := l.Accept(); err == nil {
			accepted <- conn
		}
	}()
	p := StartExternal(t, socket, tr, PluginOptions{})
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-time.After(startTimeout):
		t.Fatalf("the plugin never connected\n%s", p.Logs())
	}
	var code int
	var body string
	deadline := time.Now().Add(startTimeout)
	for {
		if c, b, ok := p.TryProbe("/readyz"); ok {
			code, body = c, b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health listener never answered\n%s", p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := "not registered with the container runtime; new containers are not being injected\n"
	if code != 503 || body != want {
		t.Fatalf("/readyz before registration = %d %q, want 503 %q", code, body, want)
	}
	if code, body := p.Probe(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz before registration = %d %q, want 200 ok", code, body)
	}
}

// startExternal stages a tree, starts a runtime and an external plugin, and waits for registration.
func startExternal(t *testing.T, channels int, rtOpts RuntimeOptions, opts PluginOptions) (*Runtime, *Tree, *Plugin) {
	t.Helper()
	tr := StageTree(t, channels)
	rt := NewRuntime(t, rtOpts)
	if err := rt.Start(t); err != nil {
		t.Fatalf("runtime start: %v", err)
	}
	p := StartExternal(t, rt.Socket, tr, opts)
	rt.WaitSynced(t, p)
	return rt, tr, p
}

// RegistrationOverSocket: an external plugin registers as 10-nvml-mock, is ready, and injects.
func RegistrationOverSocket(t *testing.T) {
	rt, _, p := startExternal(t, 2, RuntimeOptions{}, PluginOptions{})
	if code, body := p.Probe(t, "/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz after registration = %d %q, want 200 ok", code, body)
	}
	if code, body := p.Probe(t, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, _ := p.Probe(t, "/metrics"); code != 404 {
		t.Fatalf("/metrics = %d, want 404", code)
	}
	adj := Create(t, rt, Pod("default", nil), Ctr(Pod("default", nil), BaseEnv))
	if len(adj.Mounts) != 1 {
		t.Fatalf("want the overlay mount from the registered plugin, got %v\n%s", adj.Mounts, p.Logs())
	}
	if !p.HasLog("registration accepted") {
		t.Fatalf("plugin did not log an accepted registration:\n%s", p.Logs())
	}
	if !p.HasLog("10-nvml-mock") {
		t.Fatalf("plugin did not register as 10-nvml-mock:\n%s", p.Logs())
	}
}

// RegistrationOverFd3: the runtime launches the binary from its plugin dir with the socket as fd 3
// and the options from the drop-in config.
func RegistrationOverFd3(t *testing.T) {
	tr := StageTree(t, 4)
	rt := NewRuntime(t, RuntimeOptions{})
	InstallLaunched(t, rt, tr)
	// Start blocks until the launched plugin registered, is configured and synchronized.
	if err := rt.Start(t); err != nil {
		t.Fatalf("synchronizing the launched plugin: %v", err)
	}
	pod := Pod("default", map[string]string{ChannelsAnno: "true"})
	adj := Create(t, rt, pod, Ctr(pod, BaseEnv))
	checkOverlay(t, adj)
	checkEnv(t, adj, FullEnv)
	checkChannels(t, adj, []int{0, 1, 2, 3})
}

// SynchronizeWithExistingPods: the plugin answers a synchronization carrying existing pods and containers.
func SynchronizeWithExistingPods(t *testing.T) {
	rt, p := startWithExisting(t, 3, map[string]string{ChannelsAnno: "true"}, 2)
	if !p.HasLog("pods=3 containers=6 more=false") {
		t.Fatalf("plugin did not see the 3 existing pods and 6 containers:\n%s", p.Logs())
	}
	checkInjectsAfter(t, rt, "synchronization")
}

// SplitSynchronize: a state over ttrpc's 4 MiB limit is sent in parts with more=true,
// which the plugin must answer with more=true and no updates.
func SplitSynchronize(t *testing.T) {
	rt, p := startWithExisting(t, 1000, map[string]string{"big": strings.Repeat("x", 6000)}, 1)
	if !p.HasLog("more=true") {
		t.Fatalf("the runtime did not split the synchronization (no more=true seen):\n%s", p.Logs())
	}
	checkInjectsAfter(t, rt, "a split synchronization")
}

// startWithExisting starts an external plugin (one staged channel) against a runtime that
// already runs pods pods with these annotations, each with perPod containers, so that the
// plugin's first synchronization carries them.
func startWithExisting(t *testing.T, pods int, annotations map[string]string, perPod int) (*Runtime, *Plugin) {
	var sandboxes []*api.PodSandbox
	var ctrs []*api.Container
	for i := 0; i < pods; i++ {
		pod := Pod("default", annotations)
		sandboxes = append(sandboxes, pod)
		for j := 0; j < perPod; j++ {
			ctrs = append(ctrs, Ctr(pod, BaseEnv))
		}
	}
	rt, _, p := startExternal(t, 1, RuntimeOptions{Pods: sandboxes, Containers: ctrs}, PluginOptions{})
	return rt, p
}

// checkInjectsAfter: a container created after the synchronization (what) still gets the overlay.
func checkInjectsAfter(t *testing.T, rt *Runtime, what string) {
	pod := Pod("default", nil)
	if adj := Create(t, rt, pod, Ctr(pod, BaseEnv)); len(adj.Mounts) != 1 {
		t.Fatalf("no injection after %s: %v", what, adj)
	}
}

// CreateContainerCases: the adjustment for each selection and staging case.
func CreateContainerCases(t *testing.T) {
	const staged = 8
	rt, tr, p := startExternal(t, staged, RuntimeOptions{}, PluginOptions{})
	create := func(t *testing.T, ns string, annotations map[string]string, env []string, mounts ...*api.Mount) *api.ContainerAdjustment {
		pod := Pod(ns, annotations)
		return Create(t, rt, pod, Ctr(pod, env, mounts...))
	}

	t.Run("ImexChannelsTrue", func(t *testing.T) {
		adj := create(t, "demo", map[string]string{ChannelsAnno: "true"}, BaseEnv)
		checkOverlay(t, adj)
		checkEnv(t, adj, FullEnv)
		checkChannels(t, adj, []int{0, 1, 2, 3, 4, 5, 6, 7})
	})
	t.Run("Selectors", func(t *testing.T) {
		cases := map[string][]int{
			"0":       {0},
			"0-3":     {0, 1, 2, 3},
			"0,5":     {0, 5},
			"0-2,7":   {0, 1, 2, 7},
			" 1 , 3 ": {1, 3},
			"TRUE":    {0, 1, 2, 3, 4, 5, 6, 7},
			"6-9":     {6, 7}, // 8 and 9 are not staged: a warning, the rest injected
			"false":   nil,
			"0-x":     nil, // malformed: a warning, no channels, creation proceeds
		}
		for selector, want := range cases {
			adj := create(t, "demo", map[string]string{ChannelsAnno: selector}, BaseEnv)
			checkOverlay(t, adj)
			checkEnv(t, adj, FullEnv)
			checkChannels(t, adj, want)
		}
		if !p.HasLog(`"0-x" is not a channel index or range`) {
			t.Fatalf("the malformed selector was not logged:\n%s", p.Logs())
		}
	})
	t.Run("NoAnnotationGetsOverlayOnly", func(t *testing.T) {
		adj := create(t, "demo", nil, BaseEnv)
		checkOverlay(t, adj)
		checkEnv(t, adj, FullEnv)
		checkChannels(t, adj, nil)
	})
	t.Run("GpuDevices", func(t *testing.T) {
		adj := create(t, "demo", map[string]string{DevicesAnno: "true", ChannelsAnno: "0"}, BaseEnv)
		checkOverlay(t, adj)
		var paths []string
		for _, d := range DevicesOf(adj) {
			paths = append(paths, d.Path)
		}
		want := []string{"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-caps-imex-channels/channel0"}
		if !reflect.DeepEqual(paths, want) {
			t.Fatalf("devices = %v, want %v", paths, want)
		}
		ctl := DevicesOf(adj)[6]
		if ctl.Major != GPUMajor || ctl.Minor != 255 || ctl.Type != "c" {
			t.Fatalf("nvidiactl = %v", ctl)
		}
	})
	t.Run("OptOut", func(t *testing.T) {
		checkNothing(t, create(t, "demo", map[string]string{OptOutAnno: "False", ChannelsAnno: "true"}, BaseEnv))
	})
	t.Run("ExcludedNamespaces", func(t *testing.T) {
		for _, ns := range []string{ExcludedNS, "kube-system"} {
			checkNothing(t, create(t, ns, map[string]string{ChannelsAnno: "true"}, BaseEnv))
		}
	})
	t.Run("AlreadyMountedOverlay", func(t *testing.T) {
		mount := &api.Mount{Destination: MountPath, Type: "bind", Source: "/elsewhere", Options: []string{"rbind", "ro"}}
		adj := create(t, "demo", map[string]string{ChannelsAnno: "true"}, BaseEnv, mount)
		checkNothing(t, adj)
	})
	t.Run("OnlyChangedEnvKeys", func(t *testing.T) {
		env := []string{"PATH=" + MountPath + "/driver/usr/bin:/bin", "MOCK_NVML_CONFIG=/mine.yaml", "NODE_NAME=custom"}
		adj := create(t, "demo", nil, env)
		checkEnv(t, adj, map[string]string{
			"LD_LIBRARY_PATH":      MountPath + "/driver/usr/lib64",
			"MOCK_TOPOLOGY_CONFIG": MountPath + "/driver/topology/topology.bin",
		})
	})
	t.Run("MissingTopology", func(t *testing.T) {
		restore := Hide(t, tr.TopologyFile())
		defer restore()
		adj := create(t, "demo", map[string]string{ChannelsAnno: "0"}, BaseEnv)
		checkOverlay(t, adj)
		checkEnv(t, adj, map[string]string{
			"PATH":             FullEnv["PATH"],
			"LD_LIBRARY_PATH":  FullEnv["LD_LIBRARY_PATH"],
			"MOCK_NVML_CONFIG": FullEnv["MOCK_NVML_CONFIG"],
		})
		checkChannels(t, adj, []int{0})
	})
	t.Run("MissingChannelDir", func(t *testing.T) {
		restore := Hide(t, tr.ChannelDir())
		defer restore()
		adj := create(t, "demo", map[string]string{ChannelsAnno: "true"}, BaseEnv)
		checkOverlay(t, adj)
		checkEnv(t, adj, FullEnv)
		checkChannels(t, adj, nil)
		if !p.HasLog("cannot list IMEX channels") {
			t.Fatalf("the missing channel dir was not logged:\n%s", p.Logs())
		}
	})
	t.Run("MissingOverlay", func(t *testing.T) {
		restore := Hide(t, tr.Root)
		defer restore()
		checkNothing(t, create(t, "demo", map[string]string{ChannelsAnno: "true"}, BaseEnv))
	})
}

// LargeAdjustment: 2048 channel devices make a ~150 KB reply, which must reach
// the Go runtime through its mux (frames of at most 4096 bytes).
func LargeAdjustment(t *testing.T) {
	rt, _, _ := startExternal(t, 2048, RuntimeOptions{}, PluginOptions{})
	pod := Pod("demo", map[string]string{ChannelsAnno: "true"})
	adj := Create(t, rt, pod, Ctr(pod, BaseEnv))
	want := make([]int, 2048)
	for i := range want {
		want[i] = i
	}
	checkChannels(t, adj, want)
}

// StalledPluginIsDropped: a plugin stalled past the request timeout is dropped,
// creation proceeds without its adjustment, and the plugin exits non-zero.
func StalledPluginIsDropped(t *testing.T) {
	adaptation.SetPluginRequestTimeout(500 * time.Millisecond)
	defer adaptation.SetPluginRequestTimeout(adaptation.DefaultPluginRequestTimeout)
	rt, _, p := startExternal(t, 1, RuntimeOptions{}, PluginOptions{Env: []string{"NVML_MOCK_NRI_TEST_STALL_MS=3000"}})
	pod := Pod("demo", map[string]string{ChannelsAnno: "true"})
	start := time.Now()
	adj := Create(t, rt, pod, Ctr(pod, BaseEnv))
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Fatalf("CreateContainer took %v, want about the 500ms request timeout", elapsed)
	}
	checkNothing(t, adj)
	if code := p.WaitExit(t, 5*time.Second); code == 0 {
		t.Fatalf("the dropped plugin exited 0, want non-zero (documented: exit so the DaemonSet restarts it)\n%s", p.Logs())
	}
	// Creation keeps working without the dropped plugin.
	checkNothing(t, Create(t, rt, pod, Ctr(pod, BaseEnv)))
}

// RuntimeGoesAway: when the runtime process dies, the plugin logs it and exits 1
// (documented: the DaemonSet restarts it and it registers with the new runtime).
// The runtime runs in a child process (see Main) so that its death closes the socket
// exactly as a containerd restart does.
func RuntimeGoesAway(t *testing.T) {
	tr := StageTree(t, 1)
	socket := filepath.Join(ShortTempDir(t, "nri-"), "nri.sock")
	runtime := exec.Command(os.Args[0], "-test.run=^$")
	runtime.Env = append(os.Environ(), roleEnv+"=runtime", socketEnv+"="+socket)
	stdout, err := runtime.StdoutPipe()
	if err != nil {
		t.Fatalf("runtime stdout: %v", err)
	}
	runtime.Stderr = os.Stderr
	if err := runtime.Start(); err != nil {
		t.Fatalf("cannot start the runtime process: %v", err)
	}
	defer func() { _ = runtime.Process.Kill(); _ = runtime.Wait() }()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("the runtime process said %q, want ready", line)
		}
	case <-time.After(startTimeout):
		t.Fatal("the runtime process did not start")
	}

	p := StartExternal(t, socket, tr, PluginOptions{})
	deadline := time.Now().Add(startTimeout)
	for !p.HasLog("registered: new containers get the mock stack") {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin did not register with the runtime process:\n%s", p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := p.Probe(t, "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d after registration, want 200", code)
	}
	if err := runtime.Process.Kill(); err != nil {
		t.Fatalf("cannot kill the runtime process: %v", err)
	}
	if code := p.WaitExit(t, 5*time.Second); code != 1 {
		t.Fatalf("plugin exit code = %d after the runtime went away, want 1\n%s", code, p.Logs())
	}
	if !p.HasLog("lost the runtime") {
		t.Fatalf("plugin did not say it lost the runtime:\n%s", p.Logs())
	}
}

func checkOverlay(t *testing.T, adj *api.ContainerAdjustment) {
	t.Helper()
	if len(adj.Mounts) != 1 {
		t.Fatalf("mounts = %v, want the overlay only", adj.Mounts)
	}
	m := adj.Mounts[0]
	root := m.Source
	if m.Destination != MountPath || m.Type != "bind" || !strings.HasPrefix(root, "/tmp/nvml-mock-") ||
		!reflect.DeepEqual(m.Options, []string{"rbind", "ro", "nosuid", "nodev"}) {
		t.Fatalf("overlay mount = %+v", m)
	}
}

func checkNothing(t *testing.T, adj *api.ContainerAdjustment) {
	t.Helper()
	if len(adj.Mounts) != 0 || len(EnvOf(adj)) != 0 || len(DevicesOf(adj)) != 0 {
		t.Fatalf("want no adjustment, got mounts %v env %v devices %d", adj.Mounts, EnvOf(adj), len(DevicesOf(adj)))
	}
}

func checkEnv(t *testing.T, adj *api.ContainerAdjustment, want map[string]string) {
	t.Helper()
	if got := EnvOf(adj); !reflect.DeepEqual(got, want) {
		t.Fatalf("env = %v, want %v", got, want)
	}
}

func checkChannels(t *testing.T, adj *api.ContainerAdjustment, want []int) {
	t.Helper()
	var got []int
	for _, d := range DevicesOf(adj) {
		var idx int
		if _, err := fmt.Sscanf(d.Path, "/dev/nvidia-caps-imex-channels/channel%d", &idx); err != nil {
			t.Fatalf("unexpected device %s", d.Path)
		}
		if d.Type != "c" || d.Major != ChannelMajor || d.Minor != int64(idx) ||
			d.FileMode == nil || d.FileMode.Value != 0o666 || d.Uid == nil || d.Uid.Value != 0 || d.Gid == nil || d.Gid.Value != 0 {
			t.Fatalf("channel%d = %+v, want c %d:%d 0666 0:0", idx, d, ChannelMajor, idx)
		}
		got = append(got, idx)
	}
	if !sort.IntsAreSorted(got) || !reflect.DeepEqual(got, want) {
		t.Fatalf("channels = %v, want %v", got, want)
	}
}
