package embedded

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed worker.js
var workerJS []byte

//go:embed worker.py
var workerPy []byte

// Clients are the applications a run can use: @libsql/client (node), PyPI
// libsql (python3) or the libsql crate (rust, a program built with cargo).
var Clients = []string{"node", "python", "rust"}

// worker is one application process with an embedded replica.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *tail
}

// tail keeps the end of a process's stderr for error messages.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// workerURLs are where an application reaches the server: its replica
// syncs from sync (and a second replica beside it from wait, when a phase
// asks); its remote reads go to sync, and to far when a network round trip
// is added.
type workerURLs struct{ sync, wait, far string }

// startWorker starts one application on local and waits for its replica's
// bootstrap. program is the rust client's built program.
func startWorker(ctx context.Context, o Options, program, local, token string, urls workerURLs) (*worker, float64, error) {
	args := []string{local, urls.sync, token, urls.wait, urls.far}
	interp := program
	if o.Client != "rust" {
		name, body := "worker.js", workerJS
		interp = "node"
		if o.Client == "python" {
			name, body, interp = "worker.py", workerPy, o.Python
		}
		script := filepath.Join(o.WorkDir, name)
		if _, err := os.Stat(script); err != nil {
			if err := os.WriteFile(script, body, 0o644); err != nil {
				return nil, 0, err
			}
		}
		args = append([]string{script}, args...)
	}
	cmd := exec.CommandContext(ctx, interp, args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+o.NodeModules)
	w := &worker{cmd: cmd, stderr: &tail{}}
	cmd.Stderr = w.stderr
	var err error
	if w.in, err = cmd.StdinPipe(); err != nil {
		return nil, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s (the embedded replicas are %s processes): %w", interp, o.Client, err)
	}
	w.out = bufio.NewScanner(stdout)
	w.out.Buffer(make([]byte, 1<<20), 256<<20)
	var ready struct {
		Ready       bool    `json:"ready"`
		BootstrapMs float64 `json:"bootstrapMs"`
		Error       string  `json:"error"`
	}
	if err := w.read(&ready); err != nil {
		w.stop()
		return nil, 0, err
	}
	if !ready.Ready {
		w.stop()
		return nil, 0, fmt.Errorf("embedded replica %s did not bootstrap: %s", local, ready.Error)
	}
	return w, ready.BootstrapMs, nil
}

// read reads the worker's next JSON line into v; an {"error"} line is an error.
func (w *worker) read(v any) error {
	for w.out.Scan() {
		line := strings.TrimSpace(w.out.Text())
		if !strings.HasPrefix(line, "{") {
			continue // the client's own log lines
		}
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Error != "" {
			return fmt.Errorf("embedded replica: %s", e.Error)
		}
		return json.Unmarshal([]byte(line), v)
	}
	return fmt.Errorf("embedded replica exited: %v; stderr: %s", w.out.Err(), w.stderr.String())
}

// call sends one command and reads its answer into v.
func (w *worker) call(cmd map[string]any, v any) error {
	b, _ := json.Marshal(cmd)
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("embedded replica: %w; stderr: %s", err, w.stderr.String())
	}
	return w.read(v)
}

func (w *worker) stop() {
	b, _ := json.Marshal(map[string]string{"op": "quit"})
	_, _ = w.in.Write(append(b, '\n'))
	_ = w.in.Close()
	_ = w.cmd.Wait()
}
