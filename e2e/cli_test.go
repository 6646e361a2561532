package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// run3 runs sluice in dir (if not empty) and returns stdout, stderr and the exit code.
func run3(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sluice %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// listed returns the names in the first column of an indented section of help text.
func listed(help, header string) []string {
	_, rest, ok := strings.Cut(help, header)
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

var (
	flagLine  = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	typedFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+) (duration|size)$`)
)

// Every command answers help on stdout with exit 0, however it is asked,
// refuses an unknown flag with exit 2 and the nearest real one, and its help
// keeps the exit-code table where it matters.
func TestCLIHelpForEveryCommand(t *testing.T) {
	top, stderr, code := run3(t, "", nil, "help")
	if code != 0 || stderr != "" {
		t.Fatalf("sluice help: exit %d, stderr %q", code, stderr)
	}
	for _, ask := range [][]string{{"-h"}, {"--help"}} {
		if out, _, code := run3(t, "", nil, ask...); code != 0 || out != top {
			t.Fatalf("sluice %v: exit %d, or not the same help as `sluice help`", ask, code)
		}
	}
	if !strings.Contains(top, "Exit codes:") {
		t.Fatal("`sluice help` lost the exit-code table")
	}
	if _, stderr, code := run3(t, "", nil); code != 2 || !strings.Contains(stderr, "Usage:") {
		t.Fatalf("bare sluice: exit %d, stderr %q", code, stderr)
	}
	// A scenario's help answers even where sluice-bench is not built (the
	// test binary has none beside it, and PATH here holds none).
	if out, stderr, code := run3(t, "", []string{"PATH=/usr/bin:/bin"}, "help", "bench", "restore"); code != 0 ||
		!strings.HasPrefix(out, "Usage: sluice bench") || !strings.Contains(out, "make build") {
		t.Fatalf("sluice help bench restore without sluice-bench: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	cmds := listed(top, "Commands:")
	for _, want := range []string{"replicate", "run", "restore", "serve", "bench", "version", "completion"} {
		if !strings.Contains(" "+strings.Join(cmds, " ")+" ", " "+want+" ") {
			t.Fatalf("`sluice help` does not list %s: %q", want, cmds)
		}
	}
	for _, c := range cmds {
		t.Run(c, func(t *testing.T) {
			help, stderr, code := run3(t, "", nil, "help", c)
			if code != 0 || stderr != "" || !strings.HasPrefix(help, "Usage: sluice "+c) {
				t.Fatalf("sluice help %s: exit %d, stderr %q, stdout %.80q", c, code, stderr, help)
			}
			for _, ask := range [][]string{{c, "-h"}, {c, "--help"}} {
				if out, _, code := run3(t, "", nil, ask...); code != 0 || out != help {
					t.Fatalf("sluice %v: exit %d, or not the help of `sluice help %s`", ask, code, c)
				}
			}
			for _, word := range []string{"seed 0", "issue ", "SEEDS"} {
				if strings.Contains(help, word) {
					t.Errorf("help of %s mentions %q", c, word)
				}
			}
			flags := flagLine.FindAllStringSubmatch(help, -1)
			if len(flags) == 0 {
				return
			}
			// Flags after an argument are parsed (unless the command hands
			// its arguments on, like run's COMMAND), and every duration and
			// size flag reads the human forms and refuses nonsense.
			if !strings.Contains(help, "Flags (before the first argument)") {
				for _, m := range typedFlag.FindAllStringSubmatch(help, -1) {
					good, bad := "7d", "7x"
					if m[2] == "size" {
						good, bad = "8MiB", "8XB"
					}
					if out, stderr, code := run3(t, "", nil, c, "ARG", "-"+m[1], good, "-h"); code != 0 || out != help {
						t.Errorf("sluice %s ARG -%s %s -h: exit %d, stderr %q", c, m[1], good, code, stderr)
					}
					if _, stderr, code := run3(t, "", nil, c, "ARG", "-"+m[1], bad); code != 2 || !strings.Contains(stderr, "-"+m[1]) {
						t.Errorf("sluice %s ARG -%s %s: exit %d, stderr %q; want a usage error naming the flag", c, m[1], bad, code, stderr)
					}
				}
			}
			// A typo of a real flag (two letters swapped) is refused with that flag suggested.
			real := ""
			for _, f := range flags {
				if len(f[1]) >= 6 {
					real = f[1]
					break
				}
			}
			if real == "" {
				return
			}
			typo := real[:2] + string(real[3]) + string(real[2]) + real[4:]
			_, stderr, code = run3(t, "", nil, c, "-"+typo)
			if code != 2 || !strings.Contains(stderr, "did you mean -"+real+"?") {
				t.Fatalf("sluice %s -%s: exit %d, stderr %q; want exit 2 suggesting -%s", c, typo, code, stderr, real)
			}
		})
	}
	_, stderr, code = run3(t, "", nil, "restroe", "x")
	if code != 2 || !strings.Contains(stderr, `did you mean "restore"?`) {
		t.Fatalf("unknown command: exit %d, stderr %q", code, stderr)
	}
	// The benchmarks are a separate binary (bench/, tested there): with no
	// sluice-bench beside sluice or on PATH, `sluice bench` says how to build it.
	_, stderr, code = run3(t, "", []string{"PATH=/usr/bin:/bin"}, "bench", "soak")
	if code == 0 || !strings.Contains(stderr, "sluice-bench") || !strings.Contains(stderr, "make build") {
		t.Fatalf("sluice bench without sluice-bench: exit %d, stderr %q", code, stderr)
	}
}

// One grammar: flags after the arguments, human durations and sizes, JSON
// logs; a bad duration or size is a usage error (exit 2) naming the flag.
func TestCLIFlagsAfterArgumentsAndHumanUnits(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(t.TempDir(), "replica")
	w := writer(t, db, 300, 3, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	side := start(t, nil, sluiceBin, "replicate", db, rep, "-sync-interval", "50ms", "-retention", "7d",
		"-l0-retention", "1h30m", "-snapshot-interval", "1d", "-log-format", "json")
	if err := w.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)
	first, _, _ := strings.Cut(side.out.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(first), &rec); err != nil || rec["msg"] == nil {
		t.Fatalf("-log-format json: first line %q is not a JSON log record: %v", first, err)
	}

	out := filepath.Join(dir, "restored.db")
	mustSluice(t, nil, "restore", rep, "-o", out, "-q", "-integrity-check", "full")
	sameDB(t, db, out)

	for _, bad := range [][]string{
		{"replicate", db, rep, "-sync-interval", "7x"},
		{"serve", "-max-body-size", "8XB"},
		{"restore", rep, "-o"},
		// Values that would otherwise be replaced by a default, or ignored.
		{"replicate", db, rep, "-sync-interval", "0"},
		{"replicate", db, rep, "-retention", "-1s"},
		{"run", "-db", db, "-replica", rep, "-replica-error-budget", "0", "--", "true"},
		{"replicate", db, rep, "-lease-fail-fast"},
		{"run", "-db", db, "-replica", rep, "-lease-ttl", "5s", "--", "true"},
		{"serve", "-durability", "bogus"},
		{"serve", "-commit-window", "-5ms"},
		{"serve", "-write-stall-timeout", "0"},
		{"serve", "-forward-timeout", "-1s"},
		{"serve", "-stall-threshold", "-1s"},
		{"serve", "-follow", "-lease"},
		{"serve", "-addr", "garbage"},
		{"serve", "-lease", "-advertise", "notaurl"},
		{"serve", "-addr", "127.0.0.1:99999"},
		{"restore", rep, "-o", out + "2", "-timestamp", "yesterday"},
		{"restore", rep, "-o", out + "2", "-parallelism", "-3"},
	} {
		_, stderr, code := run3(t, "", nil, bad...)
		if code != 2 || !strings.Contains(stderr, "Run 'sluice help") {
			t.Errorf("sluice %v: exit %d, stderr %q; want a usage error", bad, code, stderr)
		}
	}
}

// ltx and info describe a replica; a replica without any file (most often a
// mistyped URL) is an error for both, while an empty level is just empty.
func TestCLIInspectReplica(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(dir, "replica")
	w := writer(t, db, 50, 5, time.Millisecond)
	side := start(t, nil, sluiceBin, "replicate", db, rep, "-sync-interval", "50ms")
	if err := w.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)

	if out, stderr, code := run3(t, "", nil, "ltx", rep); code != 0 || !strings.Contains(out, "min_txid") {
		t.Errorf("ltx: exit %d, %q %q", code, out, stderr)
	}
	if out, stderr, code := run3(t, "", nil, "info", rep); code != 0 || out == "" {
		t.Errorf("info: exit %d, %q %q", code, out, stderr)
	}
	if _, stderr, code := run3(t, "", nil, "ltx", rep, "-level", "5"); code != 0 || !strings.Contains(stderr, "no LTX file at level 5") {
		t.Errorf("ltx -level 5: exit %d, %q", code, stderr)
	}
	empty := "file://" + t.TempDir()
	for _, cmd := range []string{"ltx", "info"} {
		if _, stderr, code := run3(t, "", nil, cmd, empty); code != 1 || !strings.Contains(stderr, "nothing replicated there yet") {
			t.Errorf("%s of an empty replica: exit %d, %q; want exit 1 saying nothing is replicated there", cmd, code, stderr)
		}
	}
}

// Typos in replica URLs are errors with a suggestion, never a local folder;
// serve's default replica inside its data directory is warned about; serve
// listens on $PORT when no address is given.
func TestCLIReplicaURLGuardsAndServePort(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replicate", db, "s3:/bucket/app"}, "did you mean s3://bucket/app?"},
		{[]string{"replicate", "-db", db, "-replica", "file:/tmp/x"}, "did you mean file:///tmp/x?"},
		{[]string{"restore", "file://tmp/x", "-o", filepath.Join(dir, "o.db")}, "did you mean file:///tmp/x?"},
		{[]string{"serve", "-replica", "sftp://host/x"}, `unknown scheme "sftp"`},
		{[]string{"run", "-db", db, "-replica", "gs:///app", "--", "true"}, "has no bucket"},
		// A forgotten s3:// is not a folder next to the working directory.
		{[]string{"replicate", db, "my-bucket/app"}, "did you mean s3://my-bucket/app"},
		// A database file given to restore without a config listing it.
		{[]string{"restore", writeFile(t, dir, "plain.db", "x"), "-o", filepath.Join(dir, "o2.db")}, "is a file, not a replica"},
		// A file that is not a database is refused before the app starts.
		{[]string{"run", "-db", writeFile(t, dir, "junk.db", "this is not a database\n"), "-replica", "./rep", "--", "touch", "app-started"}, "is not an SQLite database"},
		// Nor is a serve config whose replica variable is not set.
		{[]string{"serve", "-config", writeFile(t, dir, "serve.yml", "replica: ${SLUICE_E2E_UNSET_REPLICA}\n")}, "$SLUICE_E2E_UNSET_REPLICA is not set"},
	} {
		_, stderr, code := run3(t, dir, nil, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("sluice %v: exit %d, stderr %q; want an error containing %q", c.args, code, stderr, c.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "app.db" && e.Name() != "serve.yml" && e.Name() != "junk.db" && e.Name() != "plain.db" {
			t.Errorf("a malformed URL created %s in the working directory", e.Name())
		}
	}

	port, err := minioproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, []string{fmt.Sprint("PORT=", port)}, "sh", "-c", "cd "+dir+" && exec "+sluiceBin+" serve -token secret-token-for-the-port-test")
	defer func() {
		_ = srv.cmd.Process.Signal(os.Interrupt)
		_ = srv.wait(t, 30*time.Second)
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer on $PORT %d: %v\n%s", port, err, srv.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(srv.out.String(), "NOT durable against losing this disk") {
		t.Fatalf("no warning about the replica inside the data directory:\n%s", srv.out.String())
	}
}

// `make sluice` stamps the binary with the commit it was built from; the
// completion scripts cover every command.
func TestCLIVersionAndCompletion(t *testing.T) {
	rev, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("make", "-C", "..", "sluice", "BIN="+bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make sluice: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), strings.TrimSpace(string(rev))) {
		t.Fatalf("version %q (%v) does not name commit %s", out, err, rev)
	}

	for _, sh := range []string{"bash", "zsh", "fish"} {
		script, stderr, code := run3(t, "", nil, "completion", sh)
		if code != 0 || stderr != "" {
			t.Fatalf("completion %s: exit %d %q", sh, code, stderr)
		}
		for _, want := range []string{"replicate", "restore", "serve", "sync-interval", "if-replica-exists"} {
			if !strings.Contains(script, want) {
				t.Errorf("%s completion lacks %s", sh, want)
			}
		}
		if path, err := exec.LookPath(sh); err == nil {
			if out, err := exec.Command(path, "-n", "-c", script).CombinedOutput(); err != nil && sh != "fish" {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		}
	}
	// Bash offers the shells after `sluice completion`, and flags and files elsewhere.
	bash, _, _ := run3(t, "", nil, "completion", "bash")
	for words, want := range map[string]string{
		"sluice completion ''": "bash zsh fish",
		"sluice completion z":  "zsh",
		"sluice restore -if-r": "-if-replica-exists",
	} {
		cmd := exec.Command("bash", "-c", bash+"\nCOMP_WORDS=("+words+"); COMP_CWORD=2; _sluice; echo \"${COMPREPLY[*]}\"")
		if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("bash completion of %s: %q (%v), want %q", words, out, err, want)
		}
	}
	if _, _, code := run3(t, "", nil, "completion", "tcsh"); code != 2 {
		t.Fatalf("completion tcsh: exit %d, want 2", code)
	}
}

// writeFile writes body to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
