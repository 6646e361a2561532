package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/server"
)

// docPages says where each command is documented: every flag its help lists
// must appear in one of these pages.
// cli.md, the flags every command shares, counts for every command.
var docPages = map[string][]string{
	"serve":      {"serve.md", "limits.md", "operations.md", "deploying.md"},
	"replicate":  {"sidecar.md", "operations.md"},
	"run":        {"sidecar.md", "operations.md"},
	"restore":    {"sidecar.md", "operations.md"},
	"sql":        {"cli.md"},
	"info":       {"cli.md"},
	"ltx":        {"cli.md"},
	"databases":  {"cli.md"},
	"verify":     {"cli.md", "operations.md"},
	"version":    {"cli.md"},
	"completion": {"cli.md"},
	"bench":      {"benchmarks.md"},
}

func readDocs(t *testing.T) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob("../docs/*.md")
	paths = append(paths, "../README.md")
	docs := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(p)] = string(b)
	}
	if len(docs) < 5 {
		t.Fatalf("found %d documentation pages under docs/", len(docs)-1)
	}
	return docs
}

// helpFlags lists the flags `sluice help CMD` prints.
func helpFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	help := mustSluice(t, nil, "help", cmd)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	return flags
}

// Every flag of every command is documented on that command's page, so
// the docs cannot fall behind the binary.
func TestDocsNameEveryFlag(t *testing.T) {
	docs := readDocs(t)
	top := mustSluice(t, nil, "help")
	for _, cmd := range listed(top, "Commands:") {
		pages, ok := docPages[cmd]
		if !ok {
			t.Errorf("command %s has no page in docs/ (add it to docPages and document it)", cmd)
			continue
		}
		var text strings.Builder
		text.WriteString(docs["cli.md"])
		for _, p := range pages {
			if docs[p] == "" {
				t.Errorf("%s: page docs/%s is missing", cmd, p)
			}
			text.WriteString(docs[p])
		}
		for f := range helpFlags(t, cmd) {
			if f == "h" || f == "help" {
				continue
			}
			re := regexp.MustCompile("(^|[^A-Za-z0-9-])-" + regexp.QuoteMeta(f) + "([^A-Za-z0-9-]|$)")
			if !re.MatchString(text.String()) {
				t.Errorf("sluice %s -%s is not documented in docs/%s", cmd, f, strings.Join(pages, ", docs/"))
			}
		}
	}
}

// shellWords splits a command line as a shell would (quotes, no expansion),
// stopping at a comment.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// codeBlocks returns the fenced blocks of a Markdown text by their info string.
func codeBlocks(text string) (blocks [][2]string) {
	var lang string
	var body strings.Builder
	in := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				blocks = append(blocks, [2]string{lang, body.String()})
				body.Reset()
			} else {
				lang = strings.TrimPrefix(l, "```")
			}
			in = !in
			continue
		}
		if in {
			body.WriteString(l + "\n")
		}
	}
	return blocks
}

// Every sluice command line shown in the docs names a real command and
// flags it has; every YAML example loads as the config it shows.
func TestDocsExamplesParse(t *testing.T) {
	docs := readDocs(t)
	flagsOf := map[string]map[string]bool{}
	checked := 0
	for page, text := range docs {
		for _, b := range codeBlocks(text) {
			lang, body := b[0], b[1]
			if lang == "yaml" {
				checkYAMLExample(t, page, body)
				checked++
				continue
			}
			body = strings.ReplaceAll(body, "\\\n", " ")
			for _, line := range strings.Split(body, "\n") {
				words := shellWords(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
				if len(words) < 2 || words[0] != "sluice" {
					continue
				}
				cmd := words[1]
				if cmd == "help" {
					continue
				}
				if _, ok := docPages[cmd]; !ok {
					if lang != "" { // a plain block may hold a table whose rows start with "sluice"
						t.Errorf("docs/%s shows `sluice %s`, which is not a command", page, cmd)
					}
					continue
				}
				if flagsOf[cmd] == nil {
					flagsOf[cmd] = helpFlags(t, cmd)
				}
				for _, w := range words[2:] {
					if w == "--" {
						break
					}
					for _, alt := range strings.Split(strings.Trim(w, "[]()."), "|") {
						alt = strings.Trim(alt, "[]()")
						if !strings.HasPrefix(alt, "-") || alt == "-" || strings.HasPrefix(alt, "--") {
							continue
						}
						name, _, _ := strings.Cut(strings.TrimPrefix(alt, "-"), "=")
						if !flagsOf[cmd][name] && name != "h" {
							t.Errorf("docs/%s: `%s` uses -%s, which sluice %s does not have", page, strings.TrimSpace(line), name, cmd)
						}
					}
				}
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d examples: are the docs' code blocks still fenced?", checked)
	}
}

// checkYAMLExample loads a YAML example as serve's config (keys of serve's)
// or, through `sluice databases`, as the sidecar's.
func checkYAMLExample(t *testing.T, page, body string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "example.yml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// Examples read secrets from the environment: give every variable a value.
	for _, m := range regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(body, -1) {
		t.Setenv(m[1], "example-value-"+strings.ToLower(m[1]))
	}
	if regexp.MustCompile(`(?m)^dbs:`).MatchString(body) {
		if out, err := sluice(t, nil, "databases", "-config", path); err != nil {
			t.Errorf("docs/%s: the sidecar config example does not load: %v\n%s", page, err, out)
		}
		return
	}
	if _, err := server.LoadConfig(path); err != nil {
		t.Errorf("docs/%s: the serve config example does not load: %v", page, err)
	}
}
