package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// racy is a program with a data race: two goroutines write one variable.
const racy = `package main

import "fmt"

func main() {
	n := 0
	done := make(chan bool)
	go func() { n++; done <- true }()
	n++
	<-done
	fmt.Println(n)
}
`

// TestRaceReportsFindARace builds a racy program with -race, runs it with
// the environment kip gets (raceEnv) and checks that RaceReports returns
// its report, which fails the run in TestMain; and nothing without one.
func TestRaceReportsFindARace(t *testing.T) {
	src := t.TempDir()
	for name, data := range map[string]string{"go.mod": "module racy\n\ngo 1.26\n", "main.go": racy} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "racy")
	build := exec.Command("go", "build", "-race", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -race: %v\n%s", err, out)
	}

	was := raceDir
	t.Cleanup(func() { raceDir = was })
	raceDir = t.TempDir()
	if races, err := RaceReports(); err != nil || races != "" {
		t.Fatalf("RaceReports before any race = %q, %v; want none", races, err)
	}
	run := exec.Command(bin)
	run.Env = append(os.Environ(), raceEnv("kip-race")...)
	out, err := run.CombinedOutput()
	if err == nil {
		t.Fatalf("the racy program exited 0 under -race; its output:\n%s", out)
	}
	if strings.Contains(string(out), "DATA RACE") {
		t.Errorf("the report went to the program's output, not to GORACE's log_path:\n%s", out)
	}
	races, err := RaceReports()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(races, "WARNING: DATA RACE") || !strings.Contains(races, filepath.Join(raceDir, "kip-race.")) {
		t.Errorf("RaceReports = %q; want the program's report under its file's name", races)
	}
}
