package harness

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

// BenchmarkCreateContainer measures CreateContainer through the runtime and the
// plugin: each iteration is one full round trip (adaptation → mux → plugin →
// stat of the staged nodes → reply → merge). It reports p50/p99 per case.
// Run with -benchtime=1000x for 1,000 requests.
func BenchmarkCreateContainer(b *testing.B) {
	cases := []struct {
		name     string
		staged   int
		selector string
	}{
		{"overlay-only", 2048, ""},
		{"channel-0", 2048, "0"},
		{"all-2048-channels", 2048, "true"},
	}
	tr := StageTree(b, 2048)
	rt := NewRuntime(b, RuntimeOptions{})
	if err := rt.Start(b); err != nil {
		b.Fatalf("runtime start: %v", err)
	}
	// NRI_BENCH_RUST_LOG=info makes the plugin log its own handling time per request (elapsed_us).
	logLevel := os.Getenv("NRI_BENCH_RUST_LOG")
	if logLevel == "" {
		logLevel = "warn"
	}
	p := StartExternal(b, rt.Socket, tr, PluginOptions{Env: []string{"RUST_LOG=" + logLevel}})
	rt.WaitSynced(b, p)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			annotations := map[string]string{}
			if c.selector != "" {
				annotations[ChannelsAnno] = c.selector
			}
			pod := Pod("demo", annotations)
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ctr := Ctr(pod, BaseEnv)
				start := time.Now()
				adj := Create(b, rt, pod, ctr)
				samples = append(samples, time.Since(start))
				if len(adj.Mounts) != 1 {
					b.Fatalf("no injection: %v", adj)
				}
			}
			b.StopTimer()
			p50, p99 := percentile(samples, 50), percentile(samples, 99)
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			if b.N >= 100 {
				if logLevel == "info" {
					fmt.Printf("plugin log:\n%s\n", p.Logs())
				}
				fmt.Printf("CreateContainer %s: n=%d p50=%v p99=%v devices=%d\n", c.name, b.N, p50, p99, devicesFor(c.selector))
			}
		})
	}
}

func devicesFor(selector string) int {
	switch selector {
	case "":
		return 0
	case "0":
		return 1
	default:
		return 2048
	}
}

func percentile(samples []time.Duration, pct int) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	idx := (len(sorted)*pct + 99) / 100
	if idx < 1 {
		idx = 1
	}
	return sorted[idx-1]
}
