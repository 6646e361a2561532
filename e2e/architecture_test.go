package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const modulePath = "github.com/sluicedb/sluice"

// The package table in ARCHITECTURE.md is the map a new engineer reads: it
// must name every package, and its order must be the import order (a
// package imports only packages on its own row or above, and internal/
// anywhere), so the map cannot drift from the code unnoticed. net/http
// stays at the HTTP edge: above the row of server/auth only the store
// backends (their SDKs) import it.
func TestArchitecturePackageMapMatchesImports(t *testing.T) {
	rows := readPackageRows(t, "../ARCHITECTURE.md")
	edge := rowOf(rows, "server/auth")
	if edge < 0 {
		t.Fatal("ARCHITECTURE.md has no row for server/auth, where the HTTP edge begins")
	}
	httpBelowEdge := map[string]bool{"replica/s3": true, "replica/gcs": true, "replica/azure": true}

	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		row := rowOf(rows, rel)
		if row < 0 {
			t.Errorf("package %s has no row in ARCHITECTURE.md's package table", rel)
			continue
		}
		if strings.HasPrefix(rel, "internal/") {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "net/http" && row < edge && !httpBelowEdge[rel] {
				t.Errorf("%s imports net/http but sits below the HTTP edge (above server/auth's row)", rel)
			}
			if !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, modulePath+"/")
			if strings.HasPrefix(dep, "internal/") || strings.Contains(dep, "/internal/") {
				continue
			}
			if r := rowOf(rows, dep); r > row {
				t.Errorf("%s imports %s, which ARCHITECTURE.md lists below it (row %d > %d): move the row or the code", rel, dep, r+1, row+1)
			}
		}
	}
}

type goPackage struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

var rowName = regexp.MustCompile("`([^`]+)`")

// readPackageRows returns, per table row, the package patterns it names:
// `a`, `a/{b,c}` and `a/...`.
func readPackageRows(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| Package |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.SplitN(line, "|", 3)[1]
		var names []string
		for _, m := range rowName.FindAllStringSubmatch(cell, -1) {
			names = append(names, expandBraces(m[1])...)
		}
		rows = append(rows, names)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no package table", path)
	}
	return rows
}

func expandBraces(p string) []string {
	open, end := strings.Index(p, "{"), strings.Index(p, "}")
	if open < 0 || end < open {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[open+1:end], ",") {
		out = append(out, p[:open]+alt+p[end+1:])
	}
	return out
}

// rowOf returns the index of the row naming pkg (exactly, or under a
// "/..." pattern), or -1.
func rowOf(rows [][]string, pkg string) int {
	for i, names := range rows {
		for _, n := range names {
			if n == pkg || (strings.HasSuffix(n, "/...") && (pkg == strings.TrimSuffix(n, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(n, "...")))) {
				return i
			}
		}
	}
	return -1
}
