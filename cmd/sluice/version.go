package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is stamped by the Makefile: -ldflags "-X main.version=$(git describe)".
var version string

func init() {
	register(command{
		name:    "version",
		summary: "print the version, the commit it was built from and the Go version",
		usage:   "sluice version",
		setup: func(fs *flag.FlagSet) runFunc {
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usagef("version", "takes no arguments")
				}
				fmt.Printf("sluice %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	})
}

// buildVersion is the -ldflags stamp, else what the Go toolchain recorded:
// the module version (go install …@v1.2.3) or the git commit it was built from.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += "-dirty"
		}
		return "devel-" + rev
	}
	return "devel (built without version control information)"
}
