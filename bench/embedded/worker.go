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

// Clients are the applications a run can use: @libsql/client (node) or
// PyPI libsql (python3).
var Clients = []string{"node", "python"}

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

// startWorker starts one application on local, synced from syncURL (and a
// second replica beside it from waitURL, when a phase asks), and
// waits for its replica's bootstrap.
func startWorker(ctx context.Context, client, dir, nodeModules, python, local, syncURL, waitURL, token string) (*worker, float64, error) {
	name, body, interp := "worker.js", workerJS, "node"
	if client == "python" {
		name, body, interp = "worker.py", workerPy, python
	}
	script := filepath.Join(dir, name)
	if _, err := os.Stat(script); err != nil {
		if err := os.WriteFile(script, body, 0o644); err != nil {
			return nil, 0, err
		}
	}
	cmd := exec.CommandContext(ctx, interp, script, local, syncURL, token, waitURL)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
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
		return nil, 0, fmt.Errorf("start %s (the embedded replicas are %s processes): %w", interp, client, err)
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
