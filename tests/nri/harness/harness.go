// Package harness drives the nvml-mock-nri plugin binary with containerd's own
// NRI runtime code (github.com/containerd/nri/pkg/adaptation), so the plugin is
// tested against the real multiplexer, ttrpc stack and result merging.
//
// The package compiles against every nri version the suites pin (v0.8 and
// v0.12): it uses only the adaptation API both share. Each suite module under
// tests/nri/ pins one nri version and runs Suite and BenchmarkCreateContainer.
//
// Inputs (environment):
//   - NRI_PLUGIN_BIN: the plugin binary (cargo build -p nri-plugin; target/debug/nvml-mock-nri).
//
// The harness stages a temporary tree with real character device nodes, so it
// must run as root (mknod).
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// Fixed facts of the staged tree the harness builds.
const (
	NodeName     = "worker2"
	ChannelMajor = 234
	GPUMajor     = 195
	UVMMajor     = 237
	NumGPUs      = 4
	MountPath    = "/opt/nvml-mock"
	ChannelsAnno = "nvml-mock.nvidia.com/imex-channels"
	DevicesAnno  = "nvml-mock.nvidia.com/devices"
	OptOutAnno   = "nvml-mock.nvidia.com/inject"
	ExcludedNS   = "mokka"
	PluginName   = "nvml-mock"
	PluginIndex  = "10"
	startTimeout = 10 * time.Second
)

// PluginBin returns the plugin binary from NRI_PLUGIN_BIN, failing loudly when it is unusable.
func PluginBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("NRI_PLUGIN_BIN")
	if bin == "" {
		t.Fatal("NRI_PLUGIN_BIN is not set: build the plugin with `cargo build -p nri-plugin` and set NRI_PLUGIN_BIN=target/debug/nvml-mock-nri (cargo test -p integration-tests --test nri_runtime does both)")
	}
	if info, err := os.Stat(bin); err != nil || info.IsDir() {
		t.Fatalf("NRI_PLUGIN_BIN=%s is not a file (%v): build it with `cargo build -p nri-plugin`", bin, err)
	}
	return bin
}

// ShortTempDir makes a temp dir with a short path (AF_UNIX paths are limited to ~107 bytes).
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		t.Fatalf("cannot create a temp dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Tree is a staged overlay in a temporary host directory.
type Tree struct {
	Root     string
	Channels int
}

// ChannelDir is the staged IMEX channel directory.
func (tr *Tree) ChannelDir() string {
	return filepath.Join(tr.Root, "driver/dev/nvidia-caps-imex-channels")
}

// TopologyFile is the staged topology.
func (tr *Tree) TopologyFile() string { return filepath.Join(tr.Root, "driver/topology/topology.bin") }

// Hide renames path away until the returned function restores it.
func Hide(t testing.TB, path string) func() {
	t.Helper()
	hidden := path + ".hidden"
	if err := os.Rename(path, hidden); err != nil {
		t.Fatalf("cannot hide %s: %v", path, err)
	}
	return func() {
		if err := os.Rename(hidden, path); err != nil {
			t.Fatalf("cannot restore %s: %v", path, err)
		}
	}
}

// StageTree builds the staged tree with `channels` IMEX channel nodes and the GPU nodes.
func StageTree(t testing.TB, channels int) *Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the NRI harness stages real device nodes with mknod and must run as root")
	}
	tr := &Tree{Root: ShortTempDir(t, "nvml-mock-"), Channels: channels}
	files := map[string]string{
		"driver/usr/bin/check-fabric":                             "#!/bin/sh\n",
		"driver/usr/lib64/libnvidia-ml.so.1":                      "",
		"driver/config/profile.bin":                               "system:\n  num_devices: 4\n",
		"driver/topology/topology.bin":                            "version: v1\n",
		"imex/proc-devices":                                       "Character devices:\n",
		"driver/proc/driver/nvidia/capabilities/fabric-imex-mgmt": "DeviceFileMinor: 1\n",
	}
	for rel, content := range files {
		path := filepath.Join(tr.Root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("mkdir: %v", err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	if err := os.MkdirAll(tr.ChannelDir(), 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	dev := filepath.Join(tr.Root, "driver/dev")
	for i := 0; i < NumGPUs; i++ {
		Mknod(t, filepath.Join(dev, fmt.Sprintf("nvidia%d", i)), GPUMajor, uint32(i))
	}
	Mknod(t, filepath.Join(dev, "nvidiactl"), GPUMajor, 255)
	Mknod(t, filepath.Join(dev, "nvidia-uvm"), UVMMajor, 0)
	Mknod(t, filepath.Join(dev, "nvidia-uvm-tools"), UVMMajor, 1)
	for i := 0; i < channels; i++ {
		Mknod(t, filepath.Join(tr.ChannelDir(), fmt.Sprintf("channel%d", i)), ChannelMajor, uint32(i))
	}
	return tr
}

// Mknod makes a 0666 character device node.
func Mknod(t testing.TB, path string, major, minor uint32) {
	t.Helper()
	dev := (uint64(major&0xfff) << 8) | (uint64(major&^0xfff) << 32) | uint64(minor&0xff) | (uint64(minor&^0xff) << 12)
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(dev)); err != nil {
		t.Fatalf("mknod %s: %v", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatalf("chmod %s: %v", path, err)
	}
}

// Runtime is containerd's NRI adaptation with fake pods, listening on a temp socket.
type Runtime struct {
	*adaptation.Adaptation
	Dir       string
	Socket    string
	PluginDir string
	ConfDir   string
	synced    chan error
	stopOnce  sync.Once
}

// RuntimeOptions are the fake runtime's existing state and plugin dir content.
type RuntimeOptions struct {
	Pods       []*api.PodSandbox
	Containers []*api.Container
}

// NewRuntime creates (but does not start) a runtime.
func NewRuntime(t testing.TB, opts RuntimeOptions) *Runtime {
	t.Helper()
	rt := &Runtime{Dir: ShortTempDir(t, "nri-"), synced: make(chan error, 16)}
	rt.Socket = filepath.Join(rt.Dir, "nri.sock")
	rt.PluginDir = filepath.Join(rt.Dir, "plugins")
	rt.ConfDir = filepath.Join(rt.Dir, "conf.d")
	for _, dir := range []string{rt.PluginDir, rt.ConfDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("mkdir: %v", err)
		}
	}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, opts.Pods, opts.Containers)
		rt.synced <- err
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	a, err := adaptation.New("containerd", "v2.2.1", syncFn, updateFn,
		adaptation.WithPluginPath(rt.PluginDir),
		adaptation.WithPluginConfigPath(rt.ConfDir),
		adaptation.WithSocketPath(rt.Socket))
	if err != nil {
		t.Fatalf("adaptation.New: %v", err)
	}
	rt.Adaptation = a
	t.Cleanup(rt.Shutdown)
	return rt
}

// Start starts the runtime, launching and synchronizing any plugin in its
// plugin dir, and returns the result of that (pre-installed plugins') synchronization.
func (rt *Runtime) Start(t testing.TB) error {
	t.Helper()
	if err := rt.Adaptation.Start(); err != nil {
		t.Fatalf("runtime Start: %v", err)
	}
	// Start synchronizes the pre-installed plugins (even none) before it returns;
	// drain that signal so WaitSynced waits for an external plugin's own.
	select {
	case err := <-rt.synced:
		return err
	default:
		t.Fatal("runtime Start returned without synchronizing pre-installed plugins")
		return nil
	}
}

// Shutdown stops the runtime once.
func (rt *Runtime) Shutdown() { rt.stopOnce.Do(rt.Adaptation.Stop) }

// WaitSynced waits for a plugin's synchronization and then for it to be in the invocation list.
func (rt *Runtime) WaitSynced(t testing.TB, p *Plugin) {
	t.Helper()
	select {
	case err := <-rt.synced:
		if err != nil {
			t.Fatalf("synchronizing the plugin failed: %v\n%s", err, p.Logs())
		}
	case <-p.done:
		t.Fatalf("the plugin exited before synchronizing: %v\n%s", p.exitErr, p.Logs())
	case <-time.After(startTimeout):
		t.Fatalf("the plugin did not synchronize within %v\n%s", startTimeout, p.Logs())
	}
	// The adaptation holds the sync lock until the plugin is in its list.
	rt.BlockPluginSync().Unblock()
}

// Plugin is a running plugin process.
type Plugin struct {
	cmd        *exec.Cmd
	out        *lockedBuffer
	done       chan struct{}
	exitErr    error
	HealthAddr string
}

// PluginOptions are extra arguments and environment for an external plugin.
type PluginOptions struct {
	Args []string
	Env  []string
}

// StartExternal runs the plugin as an external plugin dialing the runtime's socket.
func StartExternal(t testing.TB, socket string, tr *Tree, opts PluginOptions) *Plugin {
	t.Helper()
	p := &Plugin{out: &lockedBuffer{}, done: make(chan struct{}), HealthAddr: freeAddr(t)}
	args := append([]string{
		"--socket-path", socket,
		"--overlay-host-path", tr.Root,
		"--node-name", NodeName,
		"--excluded-namespaces", ExcludedNS + ",kube-system",
		"--health-addr", p.HealthAddr,
	}, opts.Args...)
	p.cmd = exec.Command(PluginBin(t), args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "RUST_LOG=info"}, opts.Env...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start the plugin: %v", err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("plugin output:\n%s", p.Logs())
		}
	})
	return p
}

// InstallLaunched puts the plugin binary into the runtime's plugin dir as
// 10-nvml-mock and its options into the drop-in config 10-nvml-mock.conf.
func InstallLaunched(t testing.TB, rt *Runtime, tr *Tree) {
	t.Helper()
	src, err := os.ReadFile(PluginBin(t))
	if err != nil {
		t.Fatalf("cannot read the plugin binary: %v", err)
	}
	name := PluginIndex + "-" + PluginName
	if err := os.WriteFile(filepath.Join(rt.PluginDir, name), src, 0o755); err != nil {
		t.Fatalf("cannot install the plugin: %v", err)
	}
	conf := fmt.Sprintf("# options for the runtime-launched plugin\n--overlay-host-path=%s\n--node-name=%s\n--excluded-namespaces=%s\n", tr.Root, NodeName, ExcludedNS)
	if err := os.WriteFile(filepath.Join(rt.ConfDir, name+".conf"), []byte(conf), 0o644); err != nil {
		t.Fatalf("cannot write the plugin config: %v", err)
	}
}

// Logs is everything the plugin printed so far.
func (p *Plugin) Logs() string { return p.out.String() }

// HasLog waits up to 2s for the plugin's output (copied asynchronously) to contain text.
func (p *Plugin) HasLog(text string) bool {
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(p.Logs(), text) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Kill stops the plugin if it still runs.
func (p *Plugin) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitExit waits for the plugin to exit and returns its exit code.
func (p *Plugin) WaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("the plugin did not exit within %v\n%s", timeout, p.Logs())
	}
	var exit *exec.ExitError
	if errors.As(p.exitErr, &exit) {
		return exit.ExitCode()
	}
	if p.exitErr != nil {
		t.Fatalf("waiting for the plugin: %v", p.exitErr)
	}
	return 0
}

// Probe GETs a health route and returns the status code and body.
func (p *Plugin) Probe(t testing.TB, path string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 2 * time.Second}
	rsp, err := client.Get("http://" + p.HealthAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, p.Logs())
	}
	defer rsp.Body.Close()
	body, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body)
}

// TryProbe is Probe without failing: ok is false when nothing answered.
func (p *Plugin) TryProbe(path string) (int, string, bool) {
	client := http.Client{Timeout: 2 * time.Second}
	rsp, err := client.Get("http://" + p.HealthAddr + path)
	if err != nil {
		return 0, "", false
	}
	defer rsp.Body.Close()
	body, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body), true
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot find a free port: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var counter struct {
	sync.Mutex
	n int
}

func nextID() int {
	counter.Lock()
	defer counter.Unlock()
	counter.n++
	return counter.n
}

// Pod is a fake pod in namespace ns with annotations.
func Pod(ns string, annotations map[string]string) *api.PodSandbox {
	id := nextID()
	return &api.PodSandbox{
		Id:          fmt.Sprintf("sandbox-%d", id),
		Name:        fmt.Sprintf("pod-%d", id),
		Uid:         fmt.Sprintf("uid-%d", id),
		Namespace:   ns,
		Annotations: annotations,
	}
}

// Ctr is a fake container of pod with env and mounts.
func Ctr(pod *api.PodSandbox, env []string, mounts ...*api.Mount) *api.Container {
	id := nextID()
	return &api.Container{
		Id:           fmt.Sprintf("ctr-%d", id),
		PodSandboxId: pod.Id,
		Name:         "main",
		Env:          env,
		Mounts:       mounts,
	}
}

// Create runs CreateContainer through the runtime and returns the merged adjustment.
func Create(t testing.TB, rt *Runtime, pod *api.PodSandbox, ctr *api.Container) *api.ContainerAdjustment {
	t.Helper()
	rsp, err := rt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		t.Fatalf("CreateContainer failed (creation must never fail because of the plugin): %v", err)
	}
	if rsp.Adjust == nil {
		return &api.ContainerAdjustment{}
	}
	return rsp.Adjust
}

// EnvOf is the adjustment's env as a map (removal markers dropped).
func EnvOf(adj *api.ContainerAdjustment) map[string]string {
	env := map[string]string{}
	for _, kv := range adj.Env {
		if !strings.HasPrefix(kv.Key, "-") {
			env[kv.Key] = kv.Value
		}
	}
	return env
}

// DevicesOf is the adjustment's Linux devices.
func DevicesOf(adj *api.ContainerAdjustment) []*api.LinuxDevice {
	if adj.Linux == nil {
		return nil
	}
	return adj.Linux.Devices
}
