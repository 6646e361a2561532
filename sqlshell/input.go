package sqlshell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/peterh/liner"
)

// lineInput yields the lines the shell runs: a script's (scannerInput) or
// a person's at a terminal (terminalInput).
type lineInput interface {
	// readLine returns the next line without its end, io.EOF at the end of
	// input, or errLineCanceled when the person typing gave the line up.
	readLine(prompt string) (string, error)
}

// errLineCanceled is Ctrl-C at the prompt: the statement being typed is
// dropped and the session goes on.
var errLineCanceled = errors.New("line canceled")

// scannerInput reads lines from a reader, printing prompts only where the
// shell was told it talks to a person.
type scannerInput struct {
	sc    *bufio.Scanner
	shell *Shell
}

func (in *scannerInput) readLine(prompt string) (string, error) {
	if in.shell.Prompt {
		fmt.Fprint(in.shell.ErrOut, prompt)
	}
	if in.sc.Scan() {
		return in.sc.Text(), nil
	}
	if err := in.sc.Err(); err != nil {
		return "", err
	}
	return "", io.EOF
}

// RunTerminal runs an interactive session on the process's terminal with
// line editing: arrow keys move and recall earlier entries (this session's
// and, when HistoryFile is set, earlier sessions'), Ctrl-C drops the line
// being typed, Ctrl-D on an empty line leaves, Ctrl-L clears the screen and
// Tab completes dot-commands, SQL keywords and table names.
func (s *Shell) RunTerminal(ctx context.Context) error {
	term := liner.NewLiner()
	defer term.Close()
	term.SetCtrlCAborts(true)
	term.SetMultiLineMode(true)
	term.SetTabCompletionStyle(liner.TabPrints)
	term.SetWordCompleter(func(line string, pos int) (string, []string, string) {
		return s.complete(ctx, line, pos)
	})
	if s.HistoryFile != "" {
		if f, err := os.Open(s.HistoryFile); err == nil {
			term.ReadHistory(f) // best effort: a damaged history file must not stop the shell
			f.Close()
		}
	}
	s.onRemember = term.AppendHistory
	defer func() { s.onRemember = nil }()
	s.Prompt = true
	return s.loop(ctx, terminalInput{term})
}

type terminalInput struct{ term *liner.State }

func (in terminalInput) readLine(prompt string) (string, error) {
	line, err := in.term.Prompt(prompt)
	if errors.Is(err, liner.ErrPromptAborted) {
		return "", errLineCanceled
	}
	return line, err
}

// dotCommands are offered by Tab at the start of a line.
var dotCommands = []string{".backup", ".dump", ".exit", ".help", ".history", ".mode", ".quit", ".read", ".schema", ".tables"}

// sqlWords are the keywords Tab offers besides table names.
var sqlWords = []string{"ALTER", "BEGIN", "COMMIT", "CREATE", "DELETE", "DROP", "FROM", "GROUP BY", "INSERT INTO",
	"JOIN", "LIMIT", "ORDER BY", "PRAGMA", "ROLLBACK", "SELECT", "SET", "TABLE", "UPDATE", "VALUES", "WHERE"}

// complete offers the dot-commands at the start of a line, and otherwise SQL
// keywords and the database's tables and views, for the word before pos.
func (s *Shell) complete(ctx context.Context, line string, pos int) (head string, completions []string, tail string) {
	if pos > len(line) {
		pos = len(line)
	}
	head, word, tail := line[:pos], "", line[pos:]
	if i := strings.LastIndexAny(head, " \t\n(,;"); i >= 0 {
		head, word = head[:i+1], head[i+1:]
	} else {
		head, word = "", head
	}
	var candidates []string
	if head == "" && strings.HasPrefix(word, ".") {
		candidates = dotCommands
	} else if word != "" {
		candidates = append(candidates, s.tableNames(ctx)...)
		candidates = append(candidates, sqlWords...)
	}
	for _, c := range candidates {
		if len(c) >= len(word) && strings.EqualFold(c[:len(word)], word) {
			if strings.ToLower(word) == word && c == strings.ToUpper(c) {
				c = strings.ToLower(c) // keep the case the person types in
			}
			completions = append(completions, c)
		}
	}
	sort.Strings(completions)
	return head, completions, tail
}

// tableNames lists the tables and views, or nothing when the database
// cannot be asked (completion must never fail the line being typed).
func (s *Shell) tableNames(ctx context.Context) []string {
	res, err := s.DB.Exec(ctx, "SELECT name FROM sqlite_master WHERE type IN ('table','view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(res.Rows))
	for _, r := range res.Rows {
		names = append(names, r[0].plain())
	}
	return names
}
