// The floor of the go-nvml row: a Go program that does nothing (the Go runtime's own start-up).
// `cargo xtask bench-vs-upstream` builds it with `go build` and times it with `driver time`.
package main

func main() {}
