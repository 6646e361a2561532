package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func init() {
	register(command{
		name:     "completion",
		summary:  "print a shell completion script: bash, zsh or fish",
		argWords: []string{"bash", "zsh", "fish"},
		usage: `sluice completion bash|zsh|fish

Completes command names and each command's flags. Install with e.g.
  sluice completion bash > /etc/bash_completion.d/sluice
  sluice completion zsh  > "${fpath[1]}/_sluice"
  sluice completion fish > ~/.config/fish/completions/sluice.fish`,
		setup: func(fs *flag.FlagSet) runFunc {
			return func(ctx context.Context, args []string) error {
				if len(args) != 1 {
					return usagef("completion", "want one shell: bash, zsh or fish")
				}
				switch args[0] {
				case "bash":
					writeBashCompletion(os.Stdout)
				case "zsh":
					writeZshCompletion(os.Stdout)
				case "fish":
					writeFishCompletion(os.Stdout)
				default:
					return usagef("completion", "unknown shell %q: want bash, zsh or fish", args[0])
				}
				return nil
			}
		},
	})
}

func writeBashCompletion(w io.Writer) {
	fmt.Fprintf(w, `# bash completion for sluice
_sluice() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "%s help" -- "$cur"))
    return
  fi
  local words="" args=""
  case "${COMP_WORDS[1]}" in
`, strings.Join(commandNames(), " "))
	for _, c := range commands {
		fmt.Fprintf(w, "    %s) words=%q args=%q ;;\n", c.name, strings.Join(c.flagNames(), " "), strings.Join(c.argWords, " "))
	}
	fmt.Fprintf(w, `    help) words=%q ;;
  esac
  if [[ "$cur" == -* || "${COMP_WORDS[1]}" == help ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  elif [ -n "$args" ]; then
    COMPREPLY=($(compgen -W "$args" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _sluice sluice
`, strings.Join(commandNames(), " "))
}

func writeZshCompletion(w io.Writer) {
	fmt.Fprintln(w, "#compdef sluice\n_sluice() {\n  if (( CURRENT == 2 )); then\n    local -a cmds\n    cmds=(")
	for _, c := range commands {
		fmt.Fprintf(w, "      %s\n", singleQuote(c.name+":"+c.summary))
	}
	fmt.Fprintln(w, "      'help:show a command'\"'\"'s flags'\n    )\n    _describe command cmds\n    return\n  fi\n  case $words[2] in")
	for _, c := range commands {
		positional := "_files"
		if len(c.argWords) > 0 {
			positional = "compadd -- " + strings.Join(c.argWords, " ")
		}
		fmt.Fprintf(w, "    %s) compadd -- %s; %s ;;\n", c.name, strings.Join(c.flagNames(), " "), positional)
	}
	fmt.Fprintf(w, "    help) compadd -- %s ;;\n  esac\n}\n_sluice \"$@\"\n", strings.Join(commandNames(), " "))
}

func writeFishCompletion(w io.Writer) {
	fmt.Fprintln(w, "# fish completion for sluice\ncomplete -c sluice -f")
	for _, c := range commands {
		fmt.Fprintf(w, "complete -c sluice -n __fish_use_subcommand -a %s -d %s\n", c.name, singleQuote(c.summary))
		if len(c.argWords) > 0 {
			fmt.Fprintf(w, "complete -c sluice -n '__fish_seen_subcommand_from %s' -a %s\n", c.name, singleQuote(strings.Join(c.argWords, " ")))
		}
		fs, _ := c.prepare()
		fs.VisitAll(func(f *flag.Flag) {
			usage := strings.SplitN(f.Usage, "\n", 2)[0]
			fmt.Fprintf(w, "complete -c sluice -n '__fish_seen_subcommand_from %s' -o %s -d %s\n", c.name, f.Name, singleQuote(usage))
		})
	}
	fmt.Fprintf(w, "complete -c sluice -n __fish_use_subcommand -a help -d 'show a command'\\''s flags'\ncomplete -c sluice -n '__fish_seen_subcommand_from help' -a %q\n", strings.Join(commandNames(), " "))
}

// singleQuote quotes s for bash, zsh and fish alike: nothing inside is expanded.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
