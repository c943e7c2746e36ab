package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
)

// The child-process runtime's environment (see RuntimeGoesAway).
const (
	roleEnv   = "NRI_HARNESS_ROLE"
	socketEnv = "NRI_HARNESS_SOCKET"
)

// Main is the suites' TestMain: it runs the tests, or, in the child process
// RuntimeGoesAway starts, serves as an NRI runtime until it is killed.
func Main(m *testing.M) {
	if os.Getenv(roleEnv) != "runtime" {
		os.Exit(m.Run())
	}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	updateFn := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	// An empty plugin dir beside the socket, removed by the parent test.
	dir := filepath.Join(filepath.Dir(os.Getenv(socketEnv)), "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "runtime process: %v\n", err)
		os.Exit(2)
	}
	a, err := adaptation.New("containerd", "v2.2.1", syncFn, updateFn,
		adaptation.WithPluginPath(dir), adaptation.WithPluginConfigPath(dir),
		adaptation.WithSocketPath(os.Getenv(socketEnv)))
	if err == nil {
		err = a.Start()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "runtime process: %v\n", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	select {}
}
