package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxPane drives a program in a real terminal: a detached tmux session of
// its own (its own server socket, so nothing else's tmux is touched).
type tmuxPane struct {
	t      *testing.T
	socket string
}

func startTmux(t *testing.T, dir string, env []string, argv ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux is needed to test the shell in a terminal (apt-get install tmux): %v", err)
	}
	p := &tmuxPane{t: t, socket: filepath.Join(dir, "tmux.sock")}
	args := append([]string{"new-session", "-d", "-x", "120", "-y", "40", "-s", "shell"}, argv...)
	cmd := exec.Command("tmux", append([]string{"-S", p.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	return p
}

// keys sends tmux key names (e.g. "Up", "C-c", "Enter") or literal text.
func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", p.socket, "send-keys", "-t", "shell"}, keys...)...).CombinedOutput(); err != nil {
		p.t.Fatalf("tmux send-keys %q: %v\n%s", keys, err, out)
	}
}

// text sends characters literally.
func (p *tmuxPane) text(s string) {
	p.t.Helper()
	if strings.HasSuffix(s, ";") {
		s += " " // tmux reads an argument ending in ';' as its own command separator
	}
	if out, err := exec.Command("tmux", "-S", p.socket, "send-keys", "-t", "shell", "-l", s).CombinedOutput(); err != nil {
		p.t.Fatalf("tmux send-keys -l %q: %v\n%s", s, err, out)
	}
}

func (p *tmuxPane) capture() string {
	out, err := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-t", "shell", "-S", "-200").CombinedOutput()
	if err != nil {
		return "(pane gone: " + err.Error() + ")"
	}
	return string(out)
}

// waitFor waits until the pane shows want n times.
func (p *tmuxPane) waitFor(want string, n int) string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pane := p.capture()
		if strings.Count(pane, want) >= n {
			return pane
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the terminal never showed %q %d times; it shows:\n%s", want, n, pane)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// visible is what the terminal shows now, without its scrollback.
func (p *tmuxPane) visible() string {
	out, _ := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-t", "shell").CombinedOutput()
	return string(out)
}

func (p *tmuxPane) alive() bool {
	return exec.Command("tmux", "-S", p.socket, "has-session", "-t", "shell").Run() == nil
}

// TestShellLineEditingInATerminal types into `sluice sql` as a person would:
// the Up arrow recalls the previous statement (not "^[[A"), Left/Right edit
// inside the line, Ctrl-C drops a half-typed statement without leaving,
// Ctrl-L clears the screen, Tab completes a table name, and Ctrl-D leaves.
func TestShellLineEditingInATerminal(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "shell.db")
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)
	pane := startTmux(t, dir, []string{"HOME=" + home, "TERM=xterm"}, sluiceBin, "sql", "-create", db)
	pane.waitFor("sluice>", 1)

	pane.text("CREATE TABLE gauges(v INTEGER); INSERT INTO gauges VALUES (40);")
	pane.keys("Enter")
	pane.waitFor("sluice>", 2)
	pane.text("SELECT 'v=' || (v + 1) AS answer FROM gauges;")
	pane.keys("Enter")
	pane.waitFor("v=41", 1)

	// Up recalls the SELECT; Left moves into it, and the typed " + 1" edits it.
	pane.keys("Up")
	pane.keys("End")
	for i := 0; i < len(") AS answer FROM gauges;"); i++ {
		pane.keys("Left")
	}
	pane.text(" + 1")
	pane.keys("Enter")
	pane.waitFor("v=42", 1)
	if strings.Contains(pane.capture(), "^[[") {
		t.Fatalf("an arrow key was echoed instead of editing:\n%s", pane.capture())
	}

	// Ctrl-C drops a half-typed statement; the session goes on.
	pane.text("SELECT upper('never run') AS x")
	pane.keys("C-c")
	pane.text("SELECT upper('went on') AS status;")
	pane.keys("Enter")
	screen := pane.waitFor("WENT ON", 1)
	if strings.Contains(screen, "NEVER RUN") {
		t.Fatalf("a statement dropped with Ctrl-C ran:\n%s", screen)
	}

	// Tab completes the table's name.
	pane.text("SELECT 'tab:' || count(*) AS n FROM gau")
	pane.keys("Tab")
	pane.text(";")
	pane.keys("Enter")
	pane.waitFor("tab:1", 1)

	// Ctrl-L clears the screen: the earlier answers leave the visible pane.
	pane.keys("C-l")
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(pane.visible(), "WENT ON") {
		if time.Now().After(deadline) {
			t.Fatalf("Ctrl-L did not clear the screen:\n%s", pane.visible())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Ctrl-D on an empty line leaves the shell, which ends the tmux session.
	pane.keys("C-d")
	deadline = time.Now().Add(10 * time.Second)
	for pane.alive() {
		if time.Now().After(deadline) {
			t.Fatalf("Ctrl-D did not leave the shell:\n%s", pane.capture())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The next session recalls this one's entries from the history file.
	pane = startTmux(t, home, []string{"HOME=" + home, "TERM=xterm"}, sluiceBin, "sql", db)
	pane.waitFor("sluice>", 1)
	pane.keys("Up")
	pane.keys("Enter")
	pane.waitFor("tab:1", 1)
	pane.keys("C-d")
}
