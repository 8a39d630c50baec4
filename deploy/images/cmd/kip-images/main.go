// Command kip-images builds Kip's release images (kip with its plugins,
// kip-cell, and each plugin alone) for several platforms, reproducibly and
// without Docker, and pushes them to a registry: make images runs it.
// Package github.com/kipcell/kip/deploy/images describes the images.
//
//	kip-images --registry 127.0.0.1:5000/kip [--platforms linux/amd64,linux/arm64]
//	           [--tag v1.2.3] [--version v1.2.3] [--images kip,kip-plugin-aws] [--insecure]
//	           [--plugins local,aws] [--images-env deploy/kustomize/base/images.env]
//
// --plugins builds a kip image with only those plugins (default all four):
// a smaller image for a cluster that runs one cloud.
//
// It prints one line per image, its reference and digest
// (127.0.0.1:5000/kip/kip:v1.2.3@sha256:…), and logs each binary's SHA-256.
// With --images-env it also writes them as name=reference@digest lines,
// the file deploy/kustomize's base takes kip's image from.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kipcell/kip/deploy/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kip-images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kip-images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		registry  = fs.String("registry", "", "where to push: host[:port][/path]; image <name> goes to <registry>/<name>:<tag> (required)")
		platforms = fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch pairs")
		version   = fs.String("version", "", "version stamped in the binaries and the labels (default: git describe, as the Makefile's VERSION)")
		tag       = fs.String("tag", "", "the images' tag (default: the version)")
		only      = fs.String("images", "", "comma-separated images to build (default all: "+imageNames()+")")
		plugins   = fs.String("plugins", "", "comma-separated plugins the kip image holds (default all: "+strings.Join(images.Plugins, ",")+")")
		insecure  = fs.Bool("insecure", false, "push over plain HTTP (always so for a loopback registry)")
		repo      = fs.String("repo", ".", "the repository's root")
		source    = fs.String("source", "https://github.com/kipcell/kip", "the org.opencontainers.image.source label")
		ca        = fs.String("ca-certificates", images.DefaultCACertificates, "the CA bundle copied into the images (Debian's ca-certificates)")
		envFile   = fs.String("images-env", "", "also write name=reference@digest lines to this file (deploy/kustomize/base/images.env)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *registry == "" {
		return errors.New("--registry is required")
	}
	rev, created, err := commit(ctx, *repo)
	if err != nil {
		return err
	}
	if *version == "" {
		if *version, err = git(ctx, *repo, "describe", "--tags", "--match", "v[0-9]*", "--always", "--dirty"); err != nil {
			return err
		}
	}
	if *tag == "" {
		*tag = *version
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := images.Options{
		Platforms:      split(*platforms),
		Images:         split(*only),
		Plugins:        split(*plugins),
		Version:        *version,
		Revision:       rev,
		Created:        created,
		Source:         *source,
		CACertificates: *ca,
		RepoDir:        *repo,
		Log:            log,
	}
	log.Info("building images", "images", *only, "platforms", *platforms, "version", *version,
		"revision", rev, "created", created.Format(time.RFC3339))
	built, err := images.Build(ctx, opts)
	if err != nil {
		return err
	}
	pushed, err := images.Push(ctx, built, images.PushOptions{Registry: *registry, Tag: *tag, Insecure: *insecure})
	if err != nil {
		return err
	}
	var env strings.Builder
	for i, p := range pushed {
		for platform, files := range built[i].Files {
			for path, sum := range files {
				log.Info("pushed", "image", p.Name, "platform", platform, "file", path, "sha256", sum)
			}
		}
		fmt.Fprintln(stdout, p.DigestRef())
		fmt.Fprintf(&env, "%s=%s\n", p.Name, p.DigestRef())
	}
	if *envFile != "" {
		if err := os.WriteFile(*envFile, []byte(env.String()), 0o644); err != nil { //nolint:gosec // a list of public image references
			return fmt.Errorf("writing --images-env: %w", err)
		}
		log.Info("wrote the images' references", "file", *envFile)
	}
	return nil
}

// commit returns the revision of HEAD in repo and the time every file and
// image gets: $SOURCE_DATE_EPOCH when set, else the commit's time.
func commit(ctx context.Context, repo string) (string, time.Time, error) {
	out, err := git(ctx, repo, "log", "-1", "--format=%H %ct")
	if err != nil {
		return "", time.Time{}, err
	}
	rev, ct, _ := strings.Cut(out, " ")
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		ct = e
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading the commit time %q (SOURCE_DATE_EPOCH): %w", ct, err)
	}
	return rev, time.Unix(secs, 0).UTC(), nil
}

func git(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", filepath.Clean(repo)}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("running git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func imageNames() string {
	var names []string
	for _, im := range images.Images() {
		names = append(names, im.Name)
	}
	return strings.Join(names, ", ")
}
