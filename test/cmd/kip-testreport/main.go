// Command kip-testreport runs the steps of make check and prints where its
// time went (test/testreport):
//
//	kip-testreport run --dir DIR --name NAME [-C DIR] [--tests] [-v] [--prefix P] -- COMMAND...
//	kip-testreport summary --dir DIR [-n 15]
//
// run runs COMMAND (go test -json, or any command) as the step NAME,
// prints its output as go test does without -v (--tests: a line for each
// top-level test as it ends; -v: everything; --prefix: every line
// started with P, for steps run at once), records it in DIR and exits
// with COMMAND's exit code. summary prints each step's time and the n
// slowest tests recorded in DIR.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kipcell/kip/test/testreport"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: kip-testreport run|summary --dir DIR …")
		return 2
	}
	fs := flag.NewFlagSet("kip-testreport "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", "", "the report directory")
	switch args[0] {
	case "run":
		opts := testreport.RunOptions{Stdout: os.Stdout, Stderr: os.Stderr}
		fs.StringVar(&opts.Name, "name", "", "the step's name")
		fs.StringVar(&opts.Chdir, "C", "", "the directory to run the command in")
		fs.BoolVar(&opts.Tests, "tests", false, "print a line for each top-level test as it ends")
		fs.BoolVar(&opts.Verbose, "v", false, "print every line, as go test -v")
		fs.StringVar(&opts.Prefix, "prefix", "", "start every line of the output with this")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if *dir == "" || opts.Name == "" || fs.NArg() == 0 {
			fmt.Fprintln(os.Stderr, "usage: kip-testreport run --dir DIR --name NAME [-C DIR] [--tests] [-v] [--prefix P] -- COMMAND...")
			return 2
		}
		opts.Dir = *dir
		// The command gets the terminal's signals itself (one process
		// group); the report waits for it to end, and records it. Caught,
		// not ignored: an ignored signal would stay ignored in the command.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM)
		code, err := testreport.Run(context.Background(), opts, fs.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "kip-testreport:", err)
			if code == 0 {
				code = 1
			}
		}
		if code < 0 {
			code = 1
		}
		return code
	case "summary":
		n := fs.Int("n", 15, "how many of the slowest tests to print")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if *dir == "" {
			fmt.Fprintln(os.Stderr, "usage: kip-testreport summary --dir DIR [-n 15]")
			return 2
		}
		rep, err := testreport.Read(*dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kip-testreport:", err)
			return 1
		}
		rep.Summary(os.Stdout, *n)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kip-testreport: unknown command %q (run or summary)\n", args[0])
	return 2
}
