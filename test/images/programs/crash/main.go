// Command crash is Kip's failing test workload: it prints "crash: stdout"
// to stdout and "crash: stderr" to stderr, then exits with the code in
// $EXIT_CODE (default 1; 0 makes it a successful short-lived job). An
// unparsable EXIT_CODE is reported on stderr and exits 1.
package main

import (
	"fmt"
	"os"
	"strconv"
)

func main() {
	code := 1
	if s := os.Getenv("EXIT_CODE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "crash: bad EXIT_CODE %q: %v\n", s, err)
		} else {
			code = n
		}
	}
	fmt.Fprintln(os.Stdout, "crash: stdout")
	fmt.Fprintln(os.Stderr, "crash: stderr")
	os.Exit(code)
}
