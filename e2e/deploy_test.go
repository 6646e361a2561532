package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/server"
)

// The Dockerfile cannot be built here (no Docker): this checks it has what
// the deployment story promises, and the static-binary test below builds
// with the same flags.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	froms, runs, user, volume, entrypoint := d.froms, d.runs, d.user, d.volume, d.entrypoint
	if len(froms) < 2 || !strings.Contains(froms[0], " AS ") {
		t.Errorf("want a multi-stage build (a named build stage, then the image), got FROM %q", froms)
	}
	final := froms[len(froms)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %q: want distroless/static (CA certificates, no libc)", final)
	}
	build := ""
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/sluice"} {
		if !strings.Contains(build, want) {
			t.Errorf("build step %q lacks %s", build, want)
		}
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q: want a non-root user", user)
	}
	if volume != "/data" {
		t.Errorf("VOLUME %q, want /data", volume)
	}
	if entrypoint != `["sluice"]` {
		t.Errorf("ENTRYPOINT %s, want [\"sluice\"]", entrypoint)
	}
}

// dockerfile is what the tests read of the repository's Dockerfile.
type dockerfile struct {
	froms, runs              []string
	user, volume, entrypoint string
	entrypointArgv, cmdArgv  []string
	env                      map[string]string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{env: map[string]string{}}
	exec := func(directive, rest string) []string {
		var argv []string
		if err := json.Unmarshal([]byte(rest), &argv); err != nil {
			t.Fatalf("Dockerfile %s %s: want the exec (JSON array) form: %v", directive, rest, err)
		}
		return argv
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		switch strings.ToUpper(f[0]) {
		case "FROM":
			d.froms = append(d.froms, rest)
			d.env = map[string]string{} // ENV belongs to its stage
		case "RUN":
			d.runs = append(d.runs, rest)
		case "USER":
			d.user = rest
		case "VOLUME":
			d.volume = rest
		case "ENTRYPOINT":
			d.entrypoint, d.entrypointArgv = rest, exec("ENTRYPOINT", rest)
		case "CMD":
			d.cmdArgv = exec("CMD", rest)
		case "ENV":
			k, v, ok := strings.Cut(rest, "=")
			if !ok {
				t.Fatalf("Dockerfile ENV %s: want KEY=VALUE", rest)
			}
			d.env[k] = v
		}
	}
	return d
}

// The image started with no arguments (docker run -p 8080:8080 IMAGE) serves:
// the Dockerfile's entrypoint, default command and environment run, chrooted
// into a root holding what the image holds. With no token configured it
// generates one at first start, prints it once and keeps it in the data
// directory; the next start reuses it without printing it. The same root with
// $PORT set (as Cloud Run sets it) listens there.
func TestImageDefaultCommandServes(t *testing.T) {
	d := readDockerfile(t)
	if d.env["PORT"] != "8080" {
		t.Fatalf("the image's ENV PORT is %q: docker run -p 8080:8080 needs it to listen on 8080", d.env["PORT"])
	}
	if len(d.entrypointArgv) != 1 || len(d.cmdArgv) == 0 {
		t.Fatalf("ENTRYPOINT %q CMD %q: want [\"sluice\"] and a default command", d.entrypointArgv, d.cmdArgv)
	}
	root := imageRoot(t)
	port := testenv.FreePort() // stands for the 8080 of the image: the host's 8080 may be taken
	start := func() (*exec.Cmd, *testenv.Output, chan error) {
		cmd := exec.Command("/usr/local/bin/"+d.entrypointArgv[0], d.cmdArgv...)
		cmd.Env = []string{fmt.Sprintf("PORT=%d", port)}
		for k, v := range d.env {
			if k != "PORT" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		inRoot(cmd, root)
		logs := &testenv.Output{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("start the image's default command: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				<-exited
			}
		})
		return cmd, logs, exited
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady := func(logs *testenv.Output, exited chan error) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if resp, err := http.Get(base + "/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
			select {
			case err := <-exited:
				t.Fatalf("the image's default command exited: %v\n%s", err, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("not serving within 60s:\n%s", logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	call := func(token, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stop := func(cmd *exec.Cmd, logs *testenv.Output, exited chan error) {
		t.Helper()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no exit within 60s of SIGTERM:\n%s", logs.String())
		}
	}

	cmd, logs, exited := start()
	waitReady(logs, exited)
	m := regexp.MustCompile(`Authorization: Bearer ([A-Za-z0-9_-]{16,})`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("first start printed no generated token:\n%s", logs.String())
	}
	token := m[1]
	if code, body := call("", "PUT", "/v1/databases/app", ""); code != 401 {
		t.Fatalf("a request without the token: %d %s, want 401", code, body)
	}
	if code, body := call(token, "PUT", "/v1/databases/app", ""); code/100 != 2 {
		t.Fatalf("create with the generated token: %d %s", code, body)
	}
	for _, q := range []string{"CREATE TABLE t(v TEXT)", "INSERT INTO t VALUES ('kept')"} {
		if code, body := call(token, "POST", "/v1/databases/app/query", `{"sql":"`+q+`"}`); code/100 != 2 {
			t.Fatalf("%s: %d %s", q, code, body)
		}
	}
	st, err := os.Stat(filepath.Join(root, "data", ".sluice-token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the generated token's file: %v, mode %v; want it kept with mode 0600", err, st)
	}
	stop(cmd, logs, exited)

	cmd, logs, exited = start()
	waitReady(logs, exited)
	if strings.Contains(logs.String(), token) {
		t.Fatalf("the second start printed the token again:\n%s", logs.String())
	}
	if code, body := call(token, "POST", "/v1/databases/app/query", `{"sql":"SELECT v FROM t"}`); code != 200 || !strings.Contains(body, "kept") {
		t.Fatalf("after a restart, the first start's token and data: %d %s", code, body)
	}
	stop(cmd, logs, exited)
}

// sluiceInvocations finds the sluice command lines in the deployment
// examples: YAML container command/args, fly.toml processes, systemd ExecStart.
func sluiceInvocations(t *testing.T) map[string][][]string {
	t.Helper()
	out := map[string][][]string{}
	yamls, _ := filepath.Glob("../deploy/*/*.yaml")
	for _, path := range yamls {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var doc any
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s is not valid YAML: %v", path, err)
			}
			walkContainers(doc, func(c map[string]any) {
				args := strings_(c["args"])
				if cmd := strings_(c["command"]); len(cmd) > 0 {
					if filepath.Base(cmd[0]) != "sluice" {
						return
					}
					args = append(cmd[1:], args...)
				}
				if len(args) > 0 {
					out[path] = append(out[path], args)
				}
			})
		}
	}
	fly, err := os.ReadFile("../deploy/fly/fly.toml")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s+app = "(.*)"$`).FindSubmatch(fly); m != nil {
		out["fly.toml"] = append(out["fly.toml"], strings.Fields(string(m[1])))
	}
	units, _ := filepath.Glob("../deploy/systemd/*.service")
	for _, path := range units {
		raw, _ := os.ReadFile(path)
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "ExecStart=/usr/local/bin/sluice "); ok {
				out[path] = append(out[path], strings.Fields(line))
			}
		}
	}
	return out
}

func walkContainers(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if cs, ok := x["containers"].([]any); ok {
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok {
					fn(m)
				}
			}
		}
		for _, y := range x {
			walkContainers(y, fn)
		}
	case []any:
		for _, y := range x {
			walkContainers(y, fn)
		}
	}
}

func strings_(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// Every sluice command line in deploy/ names a command and flags this
// binary has, so the examples cannot drift from the CLI; the Fly config
// loads as serve's config.
func TestDeployExamplesMatchTheBinary(t *testing.T) {
	found := sluiceInvocations(t)
	for _, want := range []string{"../deploy/cloudrun/run-sidecar.yaml", "../deploy/cloudrun/serve.yaml", "../deploy/kubernetes/deployment.yaml", "fly.toml", "../deploy/systemd/sluice.service"} {
		if len(found[want]) == 0 {
			t.Errorf("no sluice command line found in %s", want)
		}
	}
	help := map[string]string{}
	for file, invocations := range found {
		for _, args := range invocations {
			cmd := args[0]
			if help[cmd] == "" {
				help[cmd] = mustSluice(t, nil, "help", cmd)
			}
			for _, a := range args[1:] {
				if a == "--" {
					break
				}
				if strings.HasPrefix(a, "-") && !strings.Contains(help[cmd], "\n  "+a+" ") && !strings.Contains(help[cmd], "\n  "+a+"\n") {
					t.Errorf("%s: sluice %s has no flag %s", file, cmd, a)
				}
			}
		}
	}

	t.Setenv("BUCKET_NAME", "my-bucket")
	t.Setenv("SLUICE_TOKEN", "s3cret")
	cfg, err := server.LoadConfig("../deploy/fly/sluice.yml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Replica != "s3://my-bucket/sluice?endpoint=https://fly.storage.tigris.dev&region=auto" || cfg.Listen != "0.0.0.0:8080" ||
		cfg.DataDir != "/data" || len(cfg.Tokens) != 1 || cfg.Tokens[0].Token != "s3cret" {
		t.Errorf("deploy/fly/sluice.yml loads as %+v", cfg)
	}
}

// The static release binary, built once for every test that needs an image root.
var (
	staticBuild sync.Once
	staticBin   string
	staticErr   error
)

// imageRoot builds the release binary (CGO_ENABLED=0, the Dockerfile's link
// flags) into an empty root holding only it, CA certificates, /tmp and
// /data, as the image does, and checks that it is static.
func imageRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, "usr", "local", "bin", "sluice")
	staticBuild.Do(func() {
		staticBin = filepath.Join(filepath.Dir(sluiceBin), "sluice-static")
		build := exec.Command("go", "build", "-ldflags", "-s -w -X main.version=static-test", "-o", staticBin, "../cmd/sluice")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("CGO_ENABLED=0 build: %v\n%s", err, out)
		}
	})
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if raw, err := os.ReadFile(staticBin); err != nil || os.WriteFile(bin, raw, 0o755) != nil {
		t.Fatalf("copy the static binary into the root: %v", err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs shared libraries %v", libs)
	}
	f.Close()

	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the host's CA bundle (to put in the root): %v", err)
	}
	for _, d := range []string{"etc/ssl/certs", "tmp", "data"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	if err := os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if len(files) != 2 {
		t.Fatalf("the root holds %v, want only the binary and the CA bundle", files)
	}

	return root
}

// inRoot runs the binary chrooted into root, as the image's user would.
func inRoot(cmd *exec.Cmd, root string) {
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	if os.Geteuid() != 0 { // an unprivileged user may chroot inside its own user namespace
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
}

// The release binary (CGO_ENABLED=0 and the Dockerfile's link flags; not
// -trimpath, which would rebuild every package instead of reusing the
// cache) is static and
// runs in an empty root holding only itself, CA certificates and /tmp: it
// serves, replicates to MinIO (127.0.0.1 is reachable from a chroot, which
// shares the network namespace), and what it acknowledged restores from the
// bucket outside the root.
func TestStaticBinaryInEmptyRoot(t *testing.T) {
	root := imageRoot(t)
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	port := testenv.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	srv := exec.Command("/usr/local/bin/sluice", "serve", "-data", "/data", "-addr", addr,
		"-replica", mn.URL(bucket, "static"), "-token", "static-root-token")
	srv.Env = mn.Env() // nothing else: no PATH, no HOME
	inRoot(srv, root)
	var logs bytes.Buffer
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatalf("start sluice in the chroot: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer func() {
		if srv.ProcessState == nil {
			srv.Process.Kill()
			<-exited
		}
	}()

	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited in the chroot: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 60s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	call := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer static-root-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s\n%s", method, path, resp.StatusCode, b, logs.String())
		}
	}
	call("PUT", "/v1/databases/app", "")
	call("POST", "/v1/databases/app/query", `{"sql":"CREATE TABLE t (id INTEGER PRIMARY KEY, msg TEXT)"}`)
	call("POST", "/v1/databases/app/query", `{"sql":"INSERT INTO t (msg) VALUES ('from an empty root')"}`)

	srv.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("sluice exited with %v after SIGTERM:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice did not stop within 60s of SIGTERM:\n%s", logs.String())
	}

	out := filepath.Join(t.TempDir(), "app.db")
	mustSluice(t, mn.Env(), "restore", "-o", out, mn.URL(bucket, "static/app"))
	db, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var msg string
	if err := db.QueryRow("SELECT msg FROM t").Scan(&msg); err != nil || msg != "from an empty root" {
		t.Fatalf("restored row %q, err %v", msg, err)
	}
}
