package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RaceEnv names the variable that turns the race-built programs off (0)
// or on (1) whatever the test binary is.
const RaceEnv = "KIP_E2E_RACE"

// RacePrograms says whether BuildBinary builds the programs of Binaries
// (kip, kip-cell, the plugins, the light cells) with -race: in every pass
// when the test binary itself has the race detector (go test -race, as
// make e2e runs it), or as RaceEnv says. The cloud passes have it too:
// a plugin's own code runs only there, and make check's packages are then
// compiled once, with -race, for vet, the unit tests and these programs
// alike (the Makefile's LINT_GOFLAGS).
func RacePrograms() bool {
	switch os.Getenv(RaceEnv) {
	case "0":
		return false
	case "1":
		return true
	}
	return testRace
}

// raceDir is where race-built programs write their reports (GORACE's
// log_path), set by BuildBinaries when RacePrograms.
var raceDir string

// raceEnv is the environment that sends a race-built program's reports
// to raceDir, in files named after name and the process ID; nil when
// nothing is race-built. kip's plugin and the plugin's cells inherit it.
func raceEnv(name string) []string {
	if raceDir == "" {
		return nil
	}
	return []string{"GORACE=halt_on_error=0 log_path=" + filepath.Join(raceDir, name)}
}

// RaceReports returns every race report the run's race-built programs
// wrote (each headed by its file, named after the kip's node and the
// process ID), or "" when there is none. TestMain fails the run on one.
func RaceReports() (string, error) {
	if raceDir == "" {
		return "", nil
	}
	files, err := filepath.Glob(filepath.Join(raceDir, "*"))
	if err != nil {
		return "", fmt.Errorf("reading race reports: %w", err)
	}
	slices.Sort(files)
	var b strings.Builder
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading race reports: %w", err)
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", file, data)
	}
	return b.String(), nil
}
