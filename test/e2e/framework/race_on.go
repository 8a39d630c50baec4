//go:build race

package framework

// testRace: this test binary was built with -race.
const testRace = true
