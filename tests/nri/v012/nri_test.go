// Package nri_v012 runs the nvml-mock-nri harness against containerd's NRI runtime code at nri v0.12.2.
package nri_v012

import (
	"testing"

	"cdsim.local/nri/harness"
)

// TestMain lets the harness run a runtime in a child process.
func TestMain(m *testing.M) { harness.Main(m) }

// TestNRI runs every harness case (see tests/nri/harness/suite.go).
func TestNRI(t *testing.T) { harness.Suite(t) }

// BenchmarkCreateContainer: run with -bench . -benchtime 1000x (see docs/bench/nri.md).
func BenchmarkCreateContainer(b *testing.B) { harness.BenchmarkCreateContainer(b) }
