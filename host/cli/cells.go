package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kipcell/kip/host/admin"
	"github.com/kipcell/kip/host/config"
	"github.com/kipcell/kip/host/metrics"
)

// runCells is `kip cells`: the cells of a running kip, from its admin
// server's /cells.
func runCells(ctx context.Context, args []string, env Env) error {
	fs := newFlagSet("cells", env)
	address := fs.String("address", "", "the running kip's admin server (default: the --config file's admin.listenAddress, else "+admin.DefaultURL+")")
	configPath := fs.String("config", "", "kip's configuration file, whose admin.listenAddress to ask")
	output := fs.String("o", "table", "output format: table or json")
	tokenFile := fs.String("token-file", "", "a file holding the bearer token to send: of a user the cluster lets get /cells (the ClusterRole kip-cells-reader), e.g. written by `kubectl create token`")
	token := fs.String("token", "", "the bearer token itself (visible to other users of this machine in the process list: prefer --token-file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("kip cells takes no arguments, got %q", fs.Args())
	}
	if *output != "table" && *output != "json" {
		return usageError("-o %q: want table or json", *output)
	}
	if *token != "" && *tokenFile != "" {
		return usageError("--token and --token-file: give one")
	}
	bearer := *token
	if *tokenFile != "" {
		data, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("reading --token-file: %w", err)
		}
		bearer = strings.TrimSpace(string(data))
	}
	url := *address
	if url == "" {
		url = admin.DefaultURL
		if *configPath != "" {
			cfg, err := config.Load(*configPath, env.Environ, nil)
			if err != nil {
				return err
			}
			if cfg.Admin.Off {
				return fmt.Errorf("%s sets admin.off: kip serves no cells there", *configPath)
			}
			url = admin.URLOf(cfg.Admin.ListenAddress)
		}
	}
	cells, err := admin.Cells(ctx, url, bearer)
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cells)
	}
	return printCells(env.Stdout, cells, time.Now())
}

// printCells writes cells as a table, their ages as of now.
func printCells(w io.Writer, cells []metrics.Cell, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tINSTANCE\tTYPE\tZONE\tCAPACITY\tPRICE\tPHASE\tAGE")
	for _, c := range cells {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Namespace, c.Pod, orDash(c.Instance), orDash(c.InstanceType),
			orDash(c.Zone), orDash(c.CapacityType), priceOf(c), c.Phase, duration.HumanDuration(now.Sub(c.Created)))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// priceOf is a cell's hourly price for people: "-" before it is placed.
func priceOf(c metrics.Cell) string {
	switch {
	case c.HourlyPrice != nil:
		return "$" + strconv.FormatFloat(*c.HourlyPrice, 'f', -1, 64) + "/h"
	case c.InstanceType == "":
		return "-"
	default:
		return "unknown"
	}
}
