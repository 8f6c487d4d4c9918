//go:build !race

package cluster

// RaceEnabled reports whether the race detector is on, which makes every
// process of a cluster test several times slower.
const RaceEnabled = false
