package sqlshell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
)

// Shell reads statements and dot-commands and prints their results.
type Shell struct {
	DB     Backend
	Out    io.Writer // results
	ErrOut io.Writer // errors and notices
	Mode   string    // table (default), csv, json or line
	// Prompt prints prompts (an interactive terminal).
	Prompt bool
	// HistoryFile, if set, gets every entry appended (~/.sluice_history).
	HistoryFile string

	history    []string
	onRemember func(entry string) // the line editor's recall list, on a terminal
	errors     int
	depth      int // nested .read
}

// errQuit ends the session (.quit, .exit).
var errQuit = errors.New("quit")

// Errors is how many statements or commands failed so far.
func (s *Shell) Errors() int { return s.errors }

func (s *Shell) mode() string {
	if s.Mode == "" {
		return "table"
	}
	return s.Mode
}

// Run reads in until end of input or .quit. Statements may span lines and
// end at ';'; a line starting with '.' (outside a statement) is a
// dot-command. Errors are printed and the session goes on.
func (s *Shell) Run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return s.loop(ctx, &scannerInput{sc: sc, shell: s})
}

// loop runs what src yields until it ends, .quit, or ctx is done.
func (s *Shell) loop(ctx context.Context, src lineInput) error {
	var pending strings.Builder
	for {
		prompt := "sluice> "
		if pending.Len() > 0 {
			prompt = "   ...> "
		}
		line, err := src.readLine(prompt)
		if errors.Is(err, errLineCanceled) {
			pending.Reset() // Ctrl-C drops the statement being typed, as in sqlite3
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if pending.Len() == 0 && strings.HasPrefix(strings.TrimSpace(line), ".") {
			s.remember(strings.TrimSpace(line))
			if err := s.dotCommand(ctx, strings.TrimSpace(line)); errors.Is(err, errQuit) {
				return nil
			} else if err != nil {
				s.fail(err)
			}
			continue
		}
		pending.WriteString(line)
		pending.WriteByte('\n')
		stmts, rest := sqltext.Statements(pending.String())
		if len(stmts) > 0 {
			s.remember(strings.TrimSpace(pending.String()[:len(pending.String())-len(rest)]))
		}
		for _, st := range stmts {
			if err := s.exec(ctx, st); err != nil {
				s.fail(err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		pending.Reset()
		pending.WriteString(rest)
	}
	if rest := strings.TrimSpace(pending.String()); rest != "" {
		// End of input ends the last statement, as in sqlite3.
		s.remember(rest)
		if err := s.exec(ctx, rest); err != nil {
			s.fail(err)
		}
	}
	if s.Prompt {
		fmt.Fprintln(s.ErrOut)
	}
	return nil
}

// RunText runs SQL text (several statements allowed) or one dot-command,
// as `sluice sql TARGET "..."` does.
func (s *Shell) RunText(ctx context.Context, text string) error {
	if strings.HasPrefix(strings.TrimSpace(text), ".") {
		if err := s.dotCommand(ctx, strings.TrimSpace(text)); err != nil && !errors.Is(err, errQuit) {
			s.fail(err)
		}
		return nil
	}
	return s.Run(ctx, strings.NewReader(text))
}

func (s *Shell) fail(err error) {
	s.errors++
	fmt.Fprintf(s.ErrOut, "Error: %v\n", err)
}

func (s *Shell) exec(ctx context.Context, st string) error {
	res, err := s.DB.Exec(ctx, st)
	if err != nil {
		return err
	}
	return writeResult(s.Out, s.mode(), res)
}

// remember keeps an entry in the session's history and appends it to the
// history file (best effort: a read-only home must not break the shell).
func (s *Shell) remember(entry string) {
	if entry == "" || s.depth > 0 { // what .read runs is not typed
		return
	}
	s.history = append(s.history, entry)
	if s.onRemember != nil {
		s.onRemember(entry)
	}
	if s.HistoryFile == "" {
		return
	}
	f, err := os.OpenFile(s.HistoryFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, strings.ReplaceAll(entry, "\n", " "))
	f.Close()
}

const helpText = `.backup FILE      write a consistent copy of the database to FILE (a new SQLite file)
.dump             print the database as SQL that rebuilds it
.help             this list
.history          the statements and commands of this session
.mode [MODE]      output mode: table, csv, json or line (no MODE: print the current one)
.quit, .exit      leave
.read FILE        run the statements and commands in FILE
.schema [TABLE]   CREATE statements (of tables matching TABLE, a LIKE pattern)
.tables [PATTERN] tables and views (matching PATTERN, a LIKE pattern)
Statements end with ';' and may span lines.
`

func (s *Shell) dotCommand(ctx context.Context, line string) error {
	fields := strings.Fields(line)
	cmd, args := fields[0], fields[1:]
	arg := func(i int) string {
		if i < len(args) {
			return unquoteArg(args[i])
		}
		return ""
	}
	switch cmd {
	case ".quit", ".exit", ".q":
		return errQuit
	case ".help":
		_, err := io.WriteString(s.Out, helpText)
		return err
	case ".history":
		for i, h := range s.history {
			fmt.Fprintf(s.Out, "%4d  %s\n", i+1, h)
		}
		return nil
	case ".mode":
		if len(args) == 0 {
			fmt.Fprintln(s.Out, s.mode())
			return nil
		}
		if !validMode(args[0]) {
			return fmt.Errorf(".mode %s: want one of %s", args[0], strings.Join(Modes, ", "))
		}
		s.Mode = args[0]
		return nil
	case ".tables":
		q := "SELECT name FROM sqlite_master WHERE type IN ('table','view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
		if p := arg(0); p != "" {
			q += " AND name LIKE " + quoteString(p)
		}
		res, err := s.DB.Exec(ctx, q+" ORDER BY 1")
		if err != nil {
			return err
		}
		var names []string
		for _, r := range res.Rows {
			names = append(names, r[0].plain())
		}
		sort.Strings(names)
		if len(names) > 0 {
			fmt.Fprintln(s.Out, strings.Join(names, "  "))
		}
		return nil
	case ".schema":
		q := "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
		if p := arg(0); p != "" {
			q += " AND tbl_name LIKE " + quoteString(p)
		}
		res, err := s.DB.Exec(ctx, q+" ORDER BY tbl_name, rowid")
		if err != nil {
			return err
		}
		for _, r := range res.Rows {
			fmt.Fprintln(s.Out, r[0].plain()+";")
		}
		return nil
	case ".dump":
		text, err := Dump(ctx, s.DB)
		if err != nil {
			return err
		}
		_, err = io.WriteString(s.Out, text)
		return err
	case ".backup", ".save":
		path := arg(0)
		if path == "" || len(args) > 1 {
			return errors.New(".backup FILE: give one file name")
		}
		if err := Backup(ctx, s.DB, path); err != nil {
			return err
		}
		fmt.Fprintf(s.ErrOut, "backed up %s to %s\n", s.DB.Describe(), path)
		return nil
	case ".read":
		path := arg(0)
		if path == "" {
			return errors.New(".read FILE: give a file name")
		}
		if s.depth >= 10 {
			return errors.New(".read: nested too deep")
		}
		f, err := os.Open(filepath.Clean(path))
		if err != nil {
			return err
		}
		defer f.Close()
		s.depth++
		defer func() { s.depth-- }()
		prompt := s.Prompt
		s.Prompt = false
		defer func() { s.Prompt = prompt }()
		return s.Run(ctx, f)
	}
	return fmt.Errorf("unknown command %s: .help lists the commands", cmd)
}

// unquoteArg strips one pair of matching quotes around a dot-command argument.
func unquoteArg(a string) string {
	if len(a) >= 2 && (a[0] == '"' || a[0] == '\'') && a[len(a)-1] == a[0] {
		return a[1 : len(a)-1]
	}
	return a
}
