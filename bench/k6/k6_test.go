package k6

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/bench/scenario"
)

func TestEveryScenarioHasAScriptThatParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: install Node.js (scripts/install-test-deps.sh needs it too)")
	}
	for _, name := range append(scenario.Names(), "lib") {
		path := name + ".js"
		src, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("scenario %s has no k6 script: %v", name, err)
			continue
		}
		if out, err := exec.Command(node, "--check", path).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", path, err, out)
		}
		if name != "lib" && !strings.Contains(string(src), "prepare('"+name+"'") {
			t.Errorf("%s does not set up scenario %s", path, name)
		}
	}
}
