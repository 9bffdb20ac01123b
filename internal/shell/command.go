package shell

import (
	"strconv"
	"strings"
)

// Command is a command line that oncekey prints for a person to paste (an `oncekey resolve`, an
// `oncekey approve`, a `temporal operator …`): every word is quoted with Word, so the pasted
// command passes exactly the values given, each as one argument, and runs nothing else. Every
// command the project prints with a value in it is built here (a test of this package reads the
// repository's code for commands built another way). The zero value is empty; methods append
// and return c, so calls chain:
//
//	shell.Cmd("temporal", "workflow", "show").Flag("--workflow-id", id).String()
//	shell.Show(key).Flag("--tenant", tenant).String() // `oncekey` commands start with Resolve, Show, Decide, …
type Command struct{ words []string }

// Cmd starts a command: the program and its fixed words (subcommands, switches), each quoted
// with Word like any value (a plain word stays as it is).
func Cmd(program string, words ...string) *Command {
	c := &Command{}
	c.words = append(c.words, Word(program))
	return c.Switch(words...)
}

// Arg appends v as one word.
func (c *Command) Arg(v string) *Command {
	c.words = append(c.words, Word(v))
	return c
}

// Switch appends fixed words: flags without a value ("--direct", "--applied").
func (c *Command) Switch(words ...string) *Command {
	for _, w := range words {
		c.words = append(c.words, Word(w))
	}
	return c
}

// Flag appends the flag name and its value v, each one word.
func (c *Command) Flag(name, v string) *Command {
	return c.Switch(name).Arg(v)
}

// FlagIf appends the flag name and v when v is not "" (an optional flag left at its default).
func (c *Command) FlagIf(name, v string) *Command {
	if v == "" {
		return c
	}
	return c.Flag(name, v)
}

// Int appends the flag name and the integer v.
func (c *Command) Int(name string, v int64) *Command {
	return c.Switch(name).Arg(strconv.FormatInt(v, 10))
}

// Placeholder appends the flag name (none when "") and text as it is: text stands for a value
// the person fills in ("<receipt>", "<why>", "'<result JSON>'"), so it must be a constant of the
// code, never a value from a workflow, a store or a request.
func (c *Command) Placeholder(name, text string) *Command {
	if name != "" {
		c.Switch(name)
	}
	c.words = append(c.words, text)
	return c
}

// String returns the command line: the words separated by single spaces.
func (c *Command) String() string { return strings.Join(c.words, " ") }
